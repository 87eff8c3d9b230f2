"""Retry delays: exponential backoff with jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before retry number ``attempts`` (1-based): ``base * factor**(attempts-1)``,
    capped at ``cap``, then "equal jitter": a uniform draw from its upper half,
    so retries of many jobs that failed together spread out but never come
    sooner than half the nominal delay. Durations are seconds."""

    base: float = 1.0
    factor: float = 2.0
    cap: float = 3600.0

    def __post_init__(self) -> None:
        if not (self.base > 0 and self.factor >= 1 and self.cap >= self.base):
            raise ValueError(
                f"invalid Backoff(base={self.base}, factor={self.factor}, cap={self.cap}): "
                "need base > 0, factor >= 1 and cap >= base"
            )

    def nominal_ms(self, attempts: int) -> int:
        exponent = max(attempts - 1, 0)
        seconds = self.cap if exponent > 64 else min(self.cap, self.base * self.factor**exponent)
        return round(seconds * 1000)

    def delay_ms(self, attempts: int, jitter: float | None = None) -> int:
        """The delay in ms; ``jitter`` in [0, 1) is drawn when not given."""
        u = random.random() if jitter is None else jitter
        nominal = self.nominal_ms(attempts)
        return nominal // 2 + round(u * (nominal - nominal // 2))
