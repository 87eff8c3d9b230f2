"""The checker on hand-made histories: a checker that never finds anything proves nothing, so
each kind of failure is shown to be caught (and a clean, duplicated run to pass)."""

from __future__ import annotations

from typing import Any

from .checker import check, most_live, timeline
from .history import History, Recorder, read_history

Record = dict[str, Any]


def rec(type_: str, job_id: str, t: float, src: str = "producer-0", **fields: Any) -> Record:
    return {"type": type_, "id": job_id, "t": t, "src": src, **fields}


def put(job_id: str, t: float, due: float) -> list[Record]:
    return [rec("invoke", job_id, t, delay=(due - t) / 1000), rec("ok", job_id, t + 1, due_at=due)]


def run(
    job_id: str, t: float, end: float | None, deadline: float, src: str, lease: str
) -> list[Record]:
    fields = {"attempt": 1, "lease": lease}
    start = rec("start", job_id, t, src, deadline=deadline, due_at=0, **fields)
    return [start] + ([] if end is None else [rec("end", job_id, end, src, **fields)])


def gone(job_id: str) -> None:
    return None


def test_a_clean_run_with_a_redelivery_passes() -> None:
    records = put("a", 0, 10) + run("a", 20, None, 1020, "worker-1", "x")
    records += run("a", 1030, 1040, 2030, "worker-2", "y")
    report = check(History(records), gone)
    assert report.ok and report.duplicated == ["a"] and report.lost == []


def test_each_failure_is_caught() -> None:
    records = put("lost", 0, 10) + put("started-vanished", 0, 10)
    records += run("started-vanished", 20, None, 1020, "worker-1", "s")
    records += run("ghost", 5, 6, 1005, "worker-1", "g")
    records += put("early", 0, 500) + run("early", 100, 110, 1100, "worker-1", "e")
    records += put("twice", 0, 10) + run("twice", 20, 200, 1020, "worker-1", "t1")
    records += run("twice", 100, 120, 1100, "worker-2", "t2")
    records += put("late", 0, 10) + run("late", 1500, 1510, 1020, "worker-1", "l")
    report = check(History(records), gone)
    assert report.lost == ["lost", "started-vanished"]
    assert report.never_started == ["lost"]
    assert report.unexpected == ["ghost"]
    assert report.early == ["early"]
    assert report.two_live_leases == ["twice"]
    assert report.late_starts == ["late"]
    assert not report.ok


def test_dead_or_stored_jobs_are_not_lost_and_indeterminate_puts_are_counted() -> None:
    records = put("dead", 0, 10) + put("waiting", 0, 10)
    records += [rec("invoke", "maybe", 0, delay=0), rec("info", "maybe", 1, error="Unavailable")]
    report = check(History(records), lambda i: "ready" if i == "waiting" else None, ["dead"])
    assert report.lost == [] and report.dead == ["dead"]
    assert report.indeterminate == ["maybe"] and report.indeterminate_stored == 0


def test_a_torn_last_line_is_skipped_and_timelines_show_every_record(tmp_path: Any) -> None:
    recorder = Recorder(tmp_path / "producer-0.jsonl")
    recorder.record("invoke", "a")
    recorder.record("ok", "a", due_at=1)
    recorder.close()
    with (tmp_path / "producer-0.jsonl").open("a") as f:
        f.write('{"type":"inv')  # a kill -9 mid-line
    history = read_history(tmp_path)
    assert history.torn == 1 and [r["type"] for r in history.by_id["a"]] == ["invoke", "ok"]
    assert "ok" in timeline("a", history) and "invoke" in timeline("a", history)


def test_a_job_recreated_by_a_retried_put_after_its_delivery_is_not_early() -> None:
    """Seen on a cluster failover: the first put's answer was lost, the job ran and was acked,
    then the retried put (same id) created it again with a later due time."""
    records = [rec("invoke", "a", 0, delay=0), rec("info", "a", 10, error="closed")]
    records += [rec("invoke", "a", 100, delay=0), *run("a", 4000, 4010, 6000, "worker-1", "x")]
    records += [rec("ok", "a", 4600, due_at=4590), *run("a", 5000, 5010, 7000, "worker-2", "y")]
    records[-2]["due_at"] = 4590
    report = check(History(records), gone)
    assert report.ok and report.duplicated == ["a"]
    records[-2]["t"] = 4500  # the second incarnation before its own due time
    assert check(History(records), gone).early == ["a"]


def test_most_live_counts_overlapping_runs_in_all_and_per_group() -> None:
    records = run("a", 0, 50, 1000, "w-1", "x") + run("b", 10, 20, 1000, "w-2", "y")
    records += run("c", 20, 30, 1000, "w-2", "z")  # starts as b ends: no overlap with it
    records += run("d", 40, None, 45, "w-3", "v")  # killed: live until its deadline
    records += run("e", 45, 60, 1000, "w-3", "u")
    for r in records:
        r["group"] = "g" if r["id"] in "ab" else None
    total, per_group = most_live(History(records))
    assert total == 2 and per_group == {"g": 2, None: 1}
