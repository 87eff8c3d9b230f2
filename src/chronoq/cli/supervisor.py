"""The supervisor of ``chronoq worker --processes P``: starts P worker
processes, forwards SIGTERM / SIGINT to them (each one: the second makes them
skip the grace; a third kills them), waits for them, and restarts one that
dies while no stop was asked for, after a pause that doubles per quick death
up to ``RESTART_CAP_S``.

Each worker runs in a process group of its own, so a Ctrl-C on the terminal
reaches the supervisor alone and every worker gets exactly one signal per
signal the supervisor received. (Under systemd, use ``KillMode=mixed``, as for
any supervisor, for the same reason.) A worker that sees its supervisor gone
stops by itself (chronoq.cli.worker). The loop sleeps in ``select`` on the
signal wake-up pipe: a signal or a child's exit (SIGCHLD) wakes it at once.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from types import FrameType

from chronoq.cli.app import EXIT_BAD_INPUT

__all__ = ["Supervisor"]

log = logging.getLogger("chronoq")

RESTART_FIRST_S = 1.0
RESTART_CAP_S = 30.0
HEALTHY_S = 30.0  # a worker that ran this long before dying is restarted after the first pause
STOPPED = {0, -signal.SIGTERM, -signal.SIGINT}  # a signal before a worker was ready kills it
FORWARDED = (signal.SIGTERM, signal.SIGINT)


@dataclass(slots=True)
class _Slot:
    number: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None


class Supervisor:
    """Runs ``argv`` in ``processes`` worker processes until a signal stops them."""

    def __init__(self, argv: list[str], processes: int, env: dict[str, str]) -> None:
        self._argv = argv
        self._env = env
        self._slots = [_Slot(n) for n in range(1, processes + 1)]
        self._pending: list[int] = []  # signals received, not yet handled
        self._signals = 0
        self._exit_code = 0

    @property
    def stopping(self) -> bool:
        return self._signals > 0 or self._exit_code != 0

    def run(self) -> int:
        """Supervise until every worker stopped; the exit code (0: a clean stop)."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous_fd = signal.set_wakeup_fd(wake_w)
        handlers = {s: signal.signal(s, self._on_signal) for s in (*FORWARDED, signal.SIGCHLD)}
        try:
            log.info("supervisor started: %d worker processes", len(self._slots))
            for slot in self._slots:
                self._start(slot)
            while True:
                self._handle_signals()
                self._reap()
                self._restart_due()
                if not (self._live() or self._waiting()):
                    break
                self._sleep(wake_r)
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            signal.set_wakeup_fd(previous_fd)
            os.close(wake_r)
            os.close(wake_w)
            self._kill_all()
        log.info("supervisor stopped")
        return self._exit_code

    # -- signals ---------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum != signal.SIGCHLD:  # SIGCHLD only wakes the loop (through the pipe)
            self._pending.append(signum)

    def _handle_signals(self) -> None:
        while self._pending:
            signum = self._pending.pop(0)
            self._signals += 1
            name = signal.Signals(signum).name
            if self._signals > 2:
                log.warning("%s received again: killing the worker processes", name)
                self._kill_all()
                continue
            running = [s for s in self._live() if s.process and s.process.poll() is None]
            what = "now" if self._signals == 2 else "after their running jobs"
            log.info("%s received: stopping %d worker processes %s", name, len(running), what)
            for slot in running:
                self._send(slot, signum)

    @staticmethod
    def _send(slot: _Slot, signum: int) -> None:
        if slot.process is not None and slot.process.poll() is None:
            slot.process.send_signal(signum)

    def _kill_all(self) -> None:
        for slot in self._live():
            self._send(slot, signal.SIGKILL)
            assert slot.process is not None
            slot.process.wait()

    # -- children --------------------------------------------------------------------

    def _live(self) -> list[_Slot]:
        return [s for s in self._slots if s.process is not None]

    def _waiting(self) -> list[_Slot]:
        return [s for s in self._slots if s.restart_at is not None]

    def _start(self, slot: _Slot) -> None:
        # a process group of its own: a terminal's Ctrl-C reaches the supervisor only
        slot.process = subprocess.Popen(
            self._argv, env=self._env, stdin=subprocess.DEVNULL, process_group=0
        )
        slot.started = time.monotonic()
        slot.restart_at = None
        log.info("worker process %d started: pid %d", slot.number, slot.process.pid)

    def _reap(self) -> None:
        for slot in self._live():
            assert slot.process is not None
            code = slot.process.poll()
            if code is None:
                continue
            pid, slot.process = slot.process.pid, None
            if self.stopping:
                self._stopped(slot, pid, code)
            else:
                self._died(slot, pid, code)

    def _stopped(self, slot: _Slot, pid: int, code: int) -> None:
        if code in STOPPED:
            log.info("worker process %d (pid %d) stopped", slot.number, pid)
            return
        log.warning("worker process %d (pid %d) %s while stopping", slot.number, pid, _how(code))
        self._exit_code = self._exit_code or 1

    def _died(self, slot: _Slot, pid: int, code: int) -> None:
        lived = time.monotonic() - slot.started
        if code == EXIT_BAD_INPUT:  # it cannot load its handlers: restarting cannot help
            log.error(
                "worker process %d (pid %d) exited with code 2 (bad input): stopping all",
                slot.number,
                pid,
            )
            self._exit_code = EXIT_BAD_INPUT
            for other in self._live():
                self._send(other, signal.SIGTERM)
            return
        slot.quick_deaths = 1 if lived >= HEALTHY_S else slot.quick_deaths + 1
        pause = min(RESTART_FIRST_S * 2 ** (slot.quick_deaths - 1), RESTART_CAP_S)
        slot.restart_at = time.monotonic() + pause
        log.warning(
            "worker process %d (pid %d) %s after %.1f s; starting another in %g s",
            slot.number,
            pid,
            _how(code),
            lived,
            pause,
        )

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot in self._waiting():
            if self.stopping:
                slot.restart_at = None
            elif slot.restart_at is not None and slot.restart_at <= now:
                self._start(slot)

    def _sleep(self, wake_r: int) -> None:
        """Until a signal, a child's exit or the next restart: each signal writes a
        byte to the wake-up pipe, even one that came before the select."""
        if self._pending:
            return
        timeout = 1.0
        for slot in self._waiting():
            assert slot.restart_at is not None
            timeout = min(timeout, max(slot.restart_at - time.monotonic(), 0.0))
        select.select([wake_r], [], [], timeout)
        _drain(wake_r)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
