"""Classes whose methods only pass a call on (the thread adapter, the two
Redis drivers) get those methods from the contract instead of a copy of each
signature: ``fill_contract`` writes every abstract method a class leaves
out, named as that class's own, so a traceback reads ``put_many``, not the
name of a generic wrapper."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["fill_contract"]

C = TypeVar("C", bound=type)


def fill_contract(cls: C, make: Callable[[str], Callable[..., Any]]) -> C:
    """Give ``cls`` each abstract method it does not define: ``make(name)``.
    Raises ``TypeError`` at import when ``make`` has no operation for one."""
    abstract: frozenset[str] = getattr(cls, "__abstractmethods__", frozenset())
    for name in sorted(abstract):
        method = make(name)
        code = method.__code__
        method.__code__ = code.replace(co_name=name, co_qualname=f"{cls.__qualname__}.{name}")
        method.__name__ = name
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        method.__doc__ = getattr(cls, name).__doc__
        method.__module__ = cls.__module__
        setattr(cls, name, method)
    abc.update_abstractmethods(cls)
    return cls
