"""Conformance: a Hypothesis state machine drives one topic through random
sequences of every operation and compares the store with a small model of
docs/contract.md §1 after each step.

Time never makes the model ambiguous: jobs are due now (delay 0) or in an hour,
leases last an hour, and the one rule that lets a lease expire uses a 10 ms
lease and sleeps past it; the model then holds the job as ready (or dead), as
docs/contract.md §1 says, whether or not a ``reserve`` has reclaimed it since.
"""

from __future__ import annotations

import functools
import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import chronoq
from chronoq import Job, Reservation, State
from chronoq.errors import LeaseLost

IDS = ("a", "b", "c", "d", "e")
FAR = 3600.0
LONG_TTR = 3600.0
SHORT_TTR = 0.01

ids = st.sampled_from(IDS)


def _new_ms_after(rule_body: Callable[..., None]) -> Callable[..., None]:
    """Let the wall clock reach a new millisecond after a rule that sets due
    times. Due times of one ms tie, and ties go by put order: without this,
    whether two jobs tie (and so which one a reserve returns) would depend on
    the machine's speed, and Hypothesis needs each run to be reproducible."""

    @functools.wraps(rule_body)
    def run(*args: Any, **kwargs: Any) -> None:
        rule_body(*args, **kwargs)
        start = time.time_ns() // 1_000_000
        while time.time_ns() // 1_000_000 <= start:
            time.sleep(0.0002)

    return run


@dataclass
class Model:
    """What the store should hold for one job."""

    state: State
    attempts: int
    priority: int
    max_attempts: int
    unique_for: float
    payload: int


class QueueMachine(RuleBasedStateMachine):
    """One topic of a store, against the model; ``store_url`` is set per test."""

    store_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.q = chronoq.connect(self.store_url)
        self.topic = f"sm-{uuid.uuid4().hex[:12]}"
        self.jobs: dict[str, Model] = {}
        self.remembered: set[str] = set()  # ids kept by unique_for
        self.leases: dict[str, Reservation] = {}  # id -> live reservation
        self.stale: list[Reservation] = []
        self.paused = False
        self.payloads = itertools.count()

    def teardown(self) -> None:
        self.q.close()

    # -- model helpers -------------------------------------------------------

    def _would_create(self, job_id: str, replace: bool) -> bool:
        if job_id in self.jobs:
            return replace and self.jobs[job_id].state is not State.RESERVED
        return replace or job_id not in self.remembered

    def _gone(self, job_id: str) -> None:
        job = self.jobs.pop(job_id)
        if job.unique_for > 0:
            self.remembered.add(job_id)
        if job_id in self.leases:
            self.stale.append(self.leases.pop(job_id))

    def _release(self, job_id: str, state: State) -> None:
        self.jobs[job_id].state = state
        self.stale.append(self.leases.pop(job_id))

    def _check_reserved(self, jobs: list[Reservation], count: int) -> None:
        ready = {i for i, job in self.jobs.items() if job.state is State.READY}
        if self.paused:
            assert jobs == [], "a paused topic handed out a job"
            return
        assert len(jobs) == min(count, len(ready)), (jobs, ready)
        assert len({j.id for j in jobs}) == len(jobs)
        for j in jobs:
            assert j.id in ready, f"reserved {j.id}, which the model says is not ready"
            model = self.jobs[j.id]
            assert (j.attempts, j.priority, j.payload) == (
                model.attempts + 1,
                model.priority,
                model.payload,
            )
            model.state = State.RESERVED
            model.attempts += 1
            self.leases[j.id] = j

    def _pick_lease(self, data: st.DataObject) -> Reservation:
        return self.leases[data.draw(st.sampled_from(sorted(self.leases)), label="lease")]

    # -- rules ---------------------------------------------------------------

    @rule(
        job_id=ids,
        far=st.booleans(),
        priority=st.integers(-2, 2),
        replace=st.booleans(),
        max_attempts=st.integers(1, 3),
        unique=st.booleans(),
    )
    @_new_ms_after
    def put(
        self,
        job_id: str,
        far: bool,
        priority: int,
        replace: bool,
        max_attempts: int,
        unique: bool,
    ) -> None:
        payload = next(self.payloads)
        expected = self._would_create(job_id, replace)
        r = self.q.put(
            self.topic,
            payload,
            id=job_id,
            delay=FAR if far else 0,
            priority=priority,
            ttr=LONG_TTR,
            max_attempts=max_attempts,
            unique_for=FAR if unique else 0,
            replace=replace,
        )
        assert (r.id, r.created) == (job_id, expected)
        if expected:
            self.remembered.discard(job_id)
            state = State.DELAYED if far else State.READY
            self.jobs[job_id] = Model(
                state, 0, priority, max_attempts, FAR if unique else 0, payload
            )

    @rule(
        batch=st.lists(st.tuples(ids, st.booleans()), min_size=1, max_size=4),
        replace=st.booleans(),
    )
    @_new_ms_after
    def put_many(self, batch: list[tuple[str, bool]], replace: bool) -> None:
        jobs = [
            Job(payload=next(self.payloads), id=i, delay=FAR if far else 0, ttr=LONG_TTR)
            for i, far in batch
        ]
        results = self.q.put_many(self.topic, jobs, replace=replace)
        assert [r.id for r in results] == [j.id for j in jobs]
        for job, (_, far), r in zip(jobs, batch, results, strict=True):
            assert job.id is not None
            expected = self._would_create(job.id, replace)
            assert r.created == expected, (job, r)
            if expected:
                self.remembered.discard(job.id)
                state = State.DELAYED if far else State.READY
                self.jobs[job.id] = Model(state, 0, 0, 5, 0, job.payload)

    @rule(count=st.integers(1, 3))
    def reserve(self, count: int) -> None:
        self._check_reserved(self.q.reserve(self.topic, count=count), count)

    @precondition(
        lambda self: not self.paused and any(j.state is State.READY for j in self.jobs.values())
    )
    @rule(reclaim=st.booleans())
    def lease_expires(self, reclaim: bool) -> None:
        """Lease a job for 10 ms and sleep past its deadline: from then on it is
        ready again (or dead), whether or not a reserve has reclaimed it yet."""
        jobs = self.q.reserve(self.topic, ttr=SHORT_TTR)
        self._check_reserved(jobs, 1)
        held = jobs[0]
        while time.time_ns() // 1_000_000 <= held.deadline + 5:
            time.sleep(0.005)
        job = self.jobs[held.id]
        self._release(held.id, State.DEAD if job.attempts >= job.max_attempts else State.READY)
        if reclaim:
            self._check_reserved(self.q.reserve(self.topic), 1)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        held = self._pick_lease(data)
        self.q.ack(held)
        self._gone(held.id)

    @precondition(lambda self: self.leases or self.stale)
    @rule(data=st.data())
    def ack_many(self, data: st.DataObject) -> None:
        live: set[str] = set()
        stale: list[Reservation] = []
        if self.leases:
            live = data.draw(st.sets(st.sampled_from(sorted(self.leases))), label="live")
        if self.stale:
            stale = data.draw(
                st.lists(st.sampled_from(self.stale), unique_by=id, max_size=3), label="stale"
            )
        chosen = [self.leases[i] for i in sorted(live)] + stale
        lost = self.q.ack_many(data.draw(st.permutations(chosen), label="order"))
        assert sorted(lost) == sorted(s.id for s in stale)
        for job_id in live:
            self._gone(job_id)

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), far=st.booleans())
    @_new_ms_after
    def nack(self, data: st.DataObject, far: bool) -> None:
        held = self._pick_lease(data)
        job = self.jobs[held.id]
        if job.attempts >= job.max_attempts:
            expected = State.DEAD
        else:
            expected = State.DELAYED if far else State.READY
        assert self.q.nack(held, delay=FAR if far else 0, error="nacked") is expected
        self._release(held.id, expected)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def bury(self, data: st.DataObject) -> None:
        held = self._pick_lease(data)
        self.q.bury(held, error="buried")
        self._release(held.id, State.DEAD)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def touch(self, data: st.DataObject) -> None:
        held = self._pick_lease(data)
        before = time.time_ns() // 1_000_000
        assert self.q.touch(held, ttr=LONG_TTR) >= before + LONG_TTR * 1000

    @precondition(lambda self: self.stale)
    @rule(data=st.data(), op=st.sampled_from(["ack", "nack", "touch", "bury"]))
    def stale_lease_is_lost(self, data: st.DataObject, op: str) -> None:
        held = data.draw(st.sampled_from(self.stale), label="stale")
        call: Any = {
            "ack": lambda: self.q.ack(held),
            "nack": lambda: self.q.nack(held, delay=0),
            "touch": lambda: self.q.touch(held),
            "bury": lambda: self.q.bury(held),
        }[op]
        with pytest.raises(LeaseLost):
            call()

    @rule(job_id=ids)
    def delete(self, job_id: str) -> None:
        assert self.q.delete(self.topic, job_id) is (job_id in self.jobs)
        if job_id in self.jobs:
            self._gone(job_id)

    @rule(job_id=ids, far=st.booleans())
    @_new_ms_after
    def reschedule(self, job_id: str, far: bool) -> None:
        job = self.jobs.get(job_id)
        movable = job is not None and job.state in (State.DELAYED, State.READY)
        assert self.q.reschedule(self.topic, job_id, delay=FAR if far else 0) is movable
        if job is not None and movable:
            job.state = State.DELAYED if far else State.READY

    @rule(which=st.none() | st.lists(ids, max_size=3))
    @_new_ms_after
    def requeue(self, which: list[str] | None) -> None:
        dead = {i for i, j in self.jobs.items() if j.state is State.DEAD}
        moved = dead if which is None else dead & set(which)
        assert self.q.requeue(self.topic, ids=which) == len(moved)
        for job_id in moved:
            self.jobs[job_id].state = State.READY
            self.jobs[job_id].attempts = 0

    @rule()
    def purge(self) -> None:
        assert self.q.purge(self.topic) == len(self.jobs)
        self.stale.extend(self.leases.values())
        self.leases.clear()
        self.jobs.clear()
        self.remembered.clear()

    @rule(paused=st.booleans())
    def pause_or_resume(self, paused: bool) -> None:
        if paused:
            self.q.pause(self.topic)
        else:
            self.q.resume(self.topic)
        self.paused = paused

    # -- invariants ----------------------------------------------------------

    @invariant()
    def jobs_match_the_model(self) -> None:
        for job_id in IDS:
            info = self.q.get(self.topic, job_id)
            model = self.jobs.get(job_id)
            if model is None:
                assert info is None, info
                continue
            assert info is not None, (job_id, model)
            seen = (info.state, info.attempts, info.priority, info.max_attempts, info.payload)
            assert seen == (
                model.state,
                model.attempts,
                model.priority,
                model.max_attempts,
                model.payload,
            ), job_id
            if model.state is State.RESERVED:
                assert info.deadline is not None
                assert info.deadline >= self.leases[job_id].deadline
            else:
                assert info.deadline is None, info

    @invariant()
    def stats_match_the_model(self) -> None:
        stats = self.q.stats(self.topic)
        want = {s.value: 0 for s in State}
        for job in self.jobs.values():
            want[job.state.value] += 1
        assert {s.value: stats[s.value] for s in State} == want
        assert stats["total"] == len(self.jobs)
        assert stats["paused"] is self.paused


# On a Redis Cluster or behind Sentinel every call is a trip through a router
# or to another node: the whole run took 298 s on a loaded day (2026-11-28),
# so the bound leaves room for a slow machine
@pytest.mark.timeout(600)
def test_queue_state_machine(store_url: str) -> None:
    machine = type("QueueMachineOnStore", (QueueMachine,), {"store_url": store_url})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=650,
            stateful_step_count=60,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            # no "explain" phase: its tracing makes shrinking a failure take minutes
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        ),
    )
