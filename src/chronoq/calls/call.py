"""What an operation is, and how a facade offers it.

An operation is a ``Call`` subclass, written once: its constructor is the
operation's signature (names, kinds, defaults) and checks the arguments, its
docstring is the operation's, and ``store`` yields the backend steps it
takes and returns the result, with no I/O of its own (the pattern of
``backends/redis/core.py``). A facade lists it as ``name = Op(TheCall)``
(``surface.py``) and performs it its own way: ``Queue`` makes each backend
call, ``AsyncQueue`` awaits it, and the HTTP clients send the requests that
``chronoq/http/ops.py`` makes of it. mypy sees each method with the
constructor's parameters and the call's result (``Op.__get__``).
"""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, Protocol, TypeAlias, TypeVar, overload

from chronoq.backends.base import AsyncWatcher, ReserveResult, Watcher
from chronoq.backoff import Backoff
from chronoq.job import Reservation

__all__ = [
    "Awaiting",
    "Blocking",
    "Call",
    "Close",
    "GiveBack",
    "Lease",
    "Op",
    "Step",
    "StoreSide",
    "StoreSteps",
    "Use",
    "Wait",
    "await_steps",
    "known",
    "run_steps",
]

T = TypeVar("T")
logger = logging.getLogger("chronoq")
P = ParamSpec("P")


# -- the steps a call yields to its facade ---------------------------------------------


class Use:
    """Call the backend's method ``name`` (of ``Backend``, or as a coroutine
    of ``AsyncBackend``) with ``args``; the step's answer is its result,
    passed through ``then`` when given. A call whose ``store`` returns a
    ``Use`` instead of steps is that one backend call (no generator: the
    facades' hot paths)."""

    __slots__ = ("args", "name", "then")

    def __init__(
        self, name: str, args: tuple[Any, ...], then: Callable[[Any], Any] | None = None
    ) -> None:
        self.name = name
        self.args = args
        self.then = then


def known(result: T) -> StoreSteps[T]:
    """Steps that take no step: the result is known without the store."""
    return result
    yield  # a generator, that never gets here


class Lease(Use):
    """A reserve attempt (``Backend.reserve``). Apart from other uses because
    on asyncio a cancelled attempt may still lease jobs at the store: the
    facade lets it finish and gives them back."""

    __slots__ = ()

    def __init__(
        self,
        topic: str,
        count: int,
        ttr_ms: int | None,
        watcher: Watcher | AsyncWatcher | None,
        then: Callable[[ReserveResult], Any] | None = None,
    ) -> None:
        super().__init__("reserve", (topic, count, ttr_ms, watcher), then)


@dataclass(frozen=True, slots=True)
class Wait:
    """After ``result`` leased nothing: wait until a job may be available,
    ``limit`` seconds at the most (the facade's way: a thread sleeps, a
    coroutine yields to its loop)."""

    watcher: Watcher | AsyncWatcher
    result: ReserveResult
    limit: float


@dataclass(frozen=True, slots=True)
class Close:
    watcher: Watcher | AsyncWatcher


@dataclass(frozen=True, slots=True)
class GiveBack:
    """Release jobs leased by a call that is failing or cancelled: nobody
    would see them until their ttr ran out."""

    jobs: list[Reservation]


Step: TypeAlias = Use | Wait | Close | GiveBack  # a Lease is a Use
#: a call on a store: yields steps, is sent their answers, returns its result
StoreSteps: TypeAlias = Generator[Step, Any, T]


class StoreSide(Protocol):
    """What a call reads of the facade it runs on."""

    @property
    def max_payload(self) -> int: ...

    @property
    def backoff(self) -> Backoff: ...


class Call(ABC, Generic[T]):
    """One operation with its arguments checked; see the module's docstring."""

    __slots__ = ()

    @abstractmethod
    def store(self, side: StoreSide) -> StoreSteps[T] | Use:
        """The steps of this call on a store, or its one backend call."""


def run_steps(steps: StoreSteps[T], do: Callable[[Step], Any]) -> T:
    """Run a call's steps, each by ``do``. A step that fails is thrown into
    the steps, so that they may take steps still (close a watcher) before
    the failure goes on to the caller."""
    answer: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = steps.send(answer) if failure is None else steps.throw(failure)
        except StopIteration as finished:
            result: T = finished.value
            return result
        failure = None
        try:
            answer = do(step)
        except BaseException as exc:
            failure = exc


async def await_steps(steps: StoreSteps[T], do: Callable[[Step], Awaitable[Any]]) -> T:
    """``run_steps`` with each step awaited."""
    answer: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = steps.send(answer) if failure is None else steps.throw(failure)
        except StopIteration as finished:
            result: T = finished.value
            return result
        failure = None
        try:
            answer = await do(step)
        except GeneratorExit:  # this coroutine is closed: no step can be awaited now
            _wind_up(steps, do)
            raise
        except BaseException as exc:
            failure = exc


def _wind_up(steps: StoreSteps[Any], do: Callable[[Step], Awaitable[Any]]) -> None:
    """The last steps of a call whose coroutine is closed (a pending task
    dropped): the steps hear the GeneratorExit and may still take steps (a
    watcher's ``Close``), each run only as far as it goes without waiting,
    since a closed coroutine may not suspend. What they raise has nobody
    left to reach."""
    try:
        step = steps.throw(GeneratorExit())
        while True:
            step = steps.send(_without_waiting(do(step)))
    except (Exception, GeneratorExit) as exc:
        if not isinstance(exc, StopIteration | GeneratorExit):
            logger.debug("a closed call's last steps failed: %r", exc)
    finally:
        steps.close()


def _without_waiting(awaitable: Awaitable[Any]) -> Any:
    """Run ``awaitable`` to its end if it gets there without suspending;
    otherwise drop it and raise GeneratorExit."""
    running = awaitable.__await__()
    try:
        running.send(None)
    except StopIteration as done:
        return done.value
    running.close()
    raise GeneratorExit


# -- the facades -------------------------------------------------------------------------


class Blocking(ABC):
    """A facade that performs calls in the calling thread. Each ``Op`` its
    class inherits becomes a method of the class when it is made."""

    @abstractmethod
    def _perform(self, call: Call[T]) -> T: ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, op in _declared(cls):
            setattr(cls, name, op.as_method(_blocking(op.make), cls))


class Awaiting(ABC):
    """A facade that performs calls as coroutines. Each ``Op`` its class
    inherits becomes a coroutine method of the class when it is made."""

    @abstractmethod
    async def _perform(self, call: Call[T]) -> T: ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, op in _declared(cls):
            setattr(cls, name, op.as_method(_awaiting(op.make), cls))


def _blocking(make: Callable[..., Call[Any]]) -> Callable[..., Any]:
    def method(self: Blocking, /, *args: Any, **kwargs: Any) -> Any:
        return self._perform(make(*args, **kwargs))

    return method


def _awaiting(make: Callable[..., Call[Any]]) -> Callable[..., Any]:
    async def method(self: Awaiting, /, *args: Any, **kwargs: Any) -> Any:
        return await self._perform(make(*args, **kwargs))

    return method


def _declared(cls: type) -> list[tuple[str, Op[Any, Any]]]:
    """The operations ``cls`` inherits as ``Op`` declarations (a facade
    class's own base, or a mixin such as ``Operations``)."""
    found = ((name, inspect.getattr_static(cls, name, None)) for name in dir(cls))
    return [(name, op) for name, op in found if isinstance(op, Op)]


class Op(Generic[P, T]):
    """The declaration of an operation on the facades, ``put = Op(Put)``:
    each facade class (a ``Blocking`` or ``Awaiting`` subclass) turns it
    into a method of its own when the class is made, which makes the call
    (checking its arguments) and performs it; ``AsyncQueue``'s is a
    coroutine. The method reads in tracebacks and ``help`` as the class's
    own (``Queue.put``), with the call's parameters and docstring; ``op`` on
    it is this declaration. The overloads of ``__get__`` are what mypy sees:
    each facade's real signature (code typed against a mixin such as
    ``Operations`` alone sees no method)."""

    def __init__(self, make: Callable[P, Call[T]]) -> None:
        self.make = make
        self.name = ""
        self.__doc__ = make.__doc__
        self._signature: inspect.Signature | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        if self.name:
            raise TypeError(f"the operation {self.name} cannot also be named {name}")
        self.name = name

    @overload
    def __get__(self, facade: None, owner: type | None = None) -> Op[P, T]: ...

    @overload
    def __get__(self, facade: Blocking, owner: type | None = None) -> Callable[P, T]: ...

    @overload
    def __get__(
        self, facade: Awaiting, owner: type | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, facade: object, owner: type | None = None) -> Any:
        if facade is not None:  # a facade class has a method in its place
            raise TypeError(f"{type(facade).__name__} performs no calls")
        return self

    def as_method(self, method: Callable[..., Any], cls: type) -> Callable[..., Any]:
        """``method`` dressed as ``cls``'s own method of this operation."""
        qualname = f"{cls.__qualname__}.{self.name}"
        code = method.__code__.replace(co_name=self.name, co_qualname=qualname)
        dressed: Any = method
        dressed.__code__ = code
        dressed.__name__ = self.name
        dressed.__qualname__ = qualname
        dressed.__doc__ = self.__doc__
        dressed.__module__ = cls.__module__
        own = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        dressed.__signature__ = self.signature.replace(
            parameters=[own, *self.signature.parameters.values()]
        )
        dressed.op = self
        return method

    @property
    def signature(self) -> inspect.Signature:
        """The operation's parameters: the call's constructor's."""
        if self._signature is None:
            self._signature = inspect.signature(self.make).replace(
                return_annotation=inspect.Signature.empty
            )
        return self._signature
