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
        q.ran(topic, seconds)


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
        q.ran("t", LONG_S if n % 3 == 0 else QUICK_S / 2)
    assert q.inline("t")


def test_slow_probes_send_it_back_for_ten_times_longer() -> None:
    q = Quickness()
    to_first_probe(q, "t")
    probe_round(q, "t", QUICK_S * 2)
    assert not q.inline("t")
    waited = 0
    while not q.on_loop("t"):
        waited += 1
    assert waited == FIRST_PROBE * 10 - 1


def test_no_probe_while_its_runs_in_threads_are_slow() -> None:
    q = Quickness()
    for _ in range(FIRST_PROBE * 3):
        assert not q.on_loop("t")
        q.threaded("t", SLOW_S * 2)


def test_one_long_run_on_the_loop_sends_it_back_to_the_threads() -> None:
    q = Quickness()
    to_first_probe(q, "t")
    probe_round(q, "t", QUICK_S / 2)
    q.ran("t", SLOW_S)  # slower than usual, but not long: stays
    assert q.inline("t")
    q.ran("t", LONG_S * 1.5)
    assert not q.inline("t") and not q.on_loop("t")


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
