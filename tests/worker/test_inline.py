"""Quick plain-function handlers run on the event loop (worker/inline.py):
told by probes on the loop, sent back to the threads by a slow run."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import chronoq
from chronoq.worker.inline import FIRST_PROBE, LONG_S, PROBES, QUICK_S, SLOW_S, Quickness


def probe_round(q: Quickness, topic: str, seconds: float) -> None:
    for _ in range(PROBES):
        assert q.on_loop(topic)
        q.ran(topic, q.epoch(topic), seconds)


def to_first_probe(q: Quickness, topic: str, thread_s: float = QUICK_S) -> None:
    for _ in range(FIRST_PROBE - 1):
        assert not q.on_loop(topic)
        q.threaded(topic, thread_s)


def test_a_quick_handler_goes_to_the_loop_after_a_round_of_quick_probes() -> None:
    q = Quickness()
    to_first_probe(q, "t")
    assert not q.inline("t")
    probe_round(q, "t", QUICK_S / 2)
    assert q.inline("t") and q.on_loop("t")


def test_a_probe_round_is_judged_by_its_median() -> None:
    q = Quickness()
    to_first_probe(q, "t")
    for n in range(PROBES):  # under half of them slow: a wait for the GIL now and then
        assert q.on_loop("t")
        q.ran("t", q.epoch("t"), SLOW_S if n % 3 == 0 else QUICK_S / 2)
    assert q.inline("t")


def test_slow_probes_send_it_back_for_ten_times_longer() -> None:
    q = Quickness()
    to_first_probe(q, "t")
    probe_round_judged = [QUICK_S * 2] * PROBES
    for seconds in probe_round_judged:
        assert q.on_loop("t")
        q.ran("t", q.epoch("t"), seconds)
    assert not q.inline("t")
    waited = 0
    while not q.on_loop("t"):
        q.threaded("t", QUICK_S)
        waited += 1
        assert waited < FIRST_PROBE * 100
    assert waited == FIRST_PROBE * 10 - 1


def test_threads_go_on_to_the_next_job_until_a_round_starts() -> None:
    q = Quickness()
    for _ in range(FIRST_PROBE - 1):
        assert q.thread_may_take("t")  # counted as it goes
        q.threaded("t", QUICK_S)
    assert not q.thread_may_take("t")  # the loop starts this one: a probe
    assert q.on_loop("t")
    assert not q.thread_may_take("t")  # more probes to hand out


def test_no_probe_while_its_runs_in_threads_are_slow() -> None:
    """(a handler that is slow in threads is never tried on the loop)"""
    q = Quickness()
    for _ in range(FIRST_PROBE * 3):
        assert not q.on_loop("t")
        q.threaded("t", SLOW_S * 2)


def test_one_long_run_on_the_loop_sends_it_back_to_the_threads() -> None:
    q = Quickness()
    to_first_probe(q, "t")
    probe_round(q, "t", QUICK_S / 2)
    q.ran("t", q.epoch("t"), SLOW_S)  # slower than usual, but not long: stays
    assert q.inline("t")
    q.ran("t", q.epoch("t"), LONG_S * 1.5)
    assert not q.inline("t") and not q.on_loop("t")


def test_a_probe_that_raises_or_runs_long_ends_the_round() -> None:
    for failed, seconds in ((True, QUICK_S / 2), (False, LONG_S * 2)):
        q = Quickness()
        to_first_probe(q, "t")
        assert q.on_loop("t")
        q.ran("t", q.epoch("t"), seconds, failed)
        assert not q.on_loop("t") and not q.inline("t")  # threads, for ten times longer


def test_runs_handed_out_before_a_change_are_not_counted() -> None:
    """With concurrency 4, jobs queued on the loop run after their handler
    went back to the threads: they must not start a round of their own."""
    q = Quickness()
    to_first_probe(q, "t")
    probe_round(q, "t", QUICK_S / 2)
    queued = [q.epoch("t")] * 3  # handed out while inline
    q.ran("t", q.epoch("t"), LONG_S * 2)  # this one sends it back
    for epoch in queued:
        q.ran("t", epoch, LONG_S * 2)  # ... and these ran after
    for _ in range(FIRST_PROBE * 10 - 1):
        assert not q.on_loop("t")
        q.threaded("t", QUICK_S)


def test_a_round_hands_out_its_probes_then_waits_for_them() -> None:
    q = Quickness()
    to_first_probe(q, "t")
    assert all(q.on_loop("t") for _ in range(PROBES))
    epoch = q.epoch("t")
    assert not q.on_loop("t")  # its probes are out: threads until they are judged
    for _ in range(PROBES):
        q.ran("t", epoch, QUICK_S / 2)
    assert q.inline("t")


def test_a_worker_runs_a_quick_handler_on_its_loop_and_a_slow_one_in_threads(
    tmp_path: Path,
) -> None:
    q = chronoq.connect(f"sqlite:///{tmp_path / 'q.db'}")
    threads: dict[str, list[int]] = {"quick": [], "slow": []}

    def quick(job: chronoq.Reservation) -> None:
        threads["quick"].append(threading.get_ident())

    def slow(job: chronoq.Reservation) -> None:
        time.sleep(SLOW_S * 2)
        threads["slow"].append(threading.get_ident())

    n = FIRST_PROBE + PROBES + 200
    q.put_many("quick", [chronoq.Job(i) for i in range(n)])
    q.put_many("slow", [chronoq.Job(i) for i in range(FIRST_PROBE + PROBES + 20)])
    w = chronoq.Worker(q, {"quick": quick, "slow": slow}, concurrency=4)
    loop_thread: list[int] = []
    runner = threading.Thread(target=lambda: (loop_thread.append(threading.get_ident()), w.run()))
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while len(threads["quick"]) < n or len(threads["slow"]) < FIRST_PROBE + PROBES + 20:
            assert time.monotonic() < deadline, {k: len(v) for k, v in threads.items()}
            time.sleep(0.02)
    finally:
        w.stop()
        runner.join(30)
    [loop] = loop_thread
    # the last jobs of the quick handler ran on the worker's loop, none of the slow one's
    assert set(threads["quick"][-100:]) == {loop}
    assert loop not in threads["slow"]
    assert q.stats("quick")["total"] == 0 and q.stats("slow")["total"] == 0
