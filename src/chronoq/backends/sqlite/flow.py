"""Flow control on the SQLite store (docs/contract.md §10): turns among a
topic's groups, its limits and each group's, paused groups, counts by group.

A topic takes part from its first job with a group, first limit or first
paused group (``enable``): from then on flow_triggers.sql keeps its groups'
ready and leased counts, whichever call moves a job, and a reserve leases one
job per turn from the group served least recently among those that may be
served, in the same transaction as every other reserve step."""

from __future__ import annotations

import math
import sqlite3
from types import MappingProxyType
from typing import Any

from chronoq.backends.sqlite.eventlog import EventLog
from chronoq.backends.sqlite.reserving import READY_SQL, lease_rows
from chronoq.backends.sqlite.signals import FileSignals
from chronoq.backends.sqlite.store import Store, add_flow_triggers
from chronoq.job import Reservation
from chronoq.limits import GROUPS_SHOWN, Limits, Rule, cleared, merged, refilled, token_wait_ms

__all__ = [
    "SQLiteFlow",
    "enable",
    "group_counts",
    "is_flow",
    "read_limits",
    "reserve_in_turns",
    "set_group_paused",
    "write_limits",
]

_NO_SLOT = -1  # flow_groups.held: until one of the group's leases ends
_TOPIC_SQL = (
    "SELECT turns, leased, tokens, refilled_at, rule, default_rule FROM flow_topics WHERE topic = ?"
)
_NEXT_GROUP_SQL = (
    "SELECT rowid, grp, leased, tokens, refilled_at, rule FROM flow_groups "
    "WHERE topic = ? AND ready > 0 AND paused = 0 AND held = 0 ORDER BY turn LIMIT 2"
)


def is_flow(db: sqlite3.Connection, topic: str) -> bool:
    return db.execute("SELECT 1 FROM flow_topics WHERE topic = ?", (topic,)).fetchone() is not None


def enable(db: sqlite3.Connection, topic: str) -> None:
    """Make ``topic`` a flow topic (once): count its ready and leased jobs by
    group, as the triggers go on doing from here."""
    if is_flow(db, topic):
        return
    add_flow_triggers(db)  # this connection's, from here on in this transaction
    db.execute(
        "INSERT INTO flow_groups (topic, grp, ready, leased) "
        "SELECT topic, coalesce(job_group, ''), sum(state = 1), sum(state = 2) FROM jobs "
        "WHERE topic = ? AND state IN (1, 2) GROUP BY topic, coalesce(job_group, '') "
        "ON CONFLICT (topic, grp) DO UPDATE SET ready = excluded.ready, leased = excluded.leased",
        (topic,),
    )
    db.execute(
        "INSERT INTO flow_topics (topic, leased) "
        "SELECT ?, count(*) FROM jobs WHERE topic = ? AND state = 2",
        (topic, topic),
    )


def reserve_in_turns(
    db: sqlite3.Connection, log: EventLog, topic: str, count: int, ttr_ms: int | None, now: int
) -> tuple[list[Reservation], float | None]:
    """Lease up to ``count`` jobs, one per turn, within the limits; and when
    none, ms until the next token that would let one go (None: none awaited)."""
    turns, leased, tokens, since, rule_text, default_text = db.execute(
        _TOPIC_SQL, (topic,)
    ).fetchone()
    topic_rule, default = Rule.unpack(rule_text), Rule.unpack(default_text)
    room = count
    if topic_rule.concurrency is not None:
        room = min(room, topic_rule.concurrency - leased)
    if topic_rule.rate is not None:
        tokens = refilled(tokens, since, now, topic_rule)
        room = min(room, math.floor(tokens))
    _tidy_groups(db, topic, default, now)
    jobs: list[Reservation] = []
    while len(jobs) < room:
        heads = db.execute(_NEXT_GROUP_SQL, (topic,)).fetchall()
        if not heads:
            break
        rowid, name, group_leased, group_tokens, group_since, own = heads[0]
        rule = default if own is None else Rule.unpack(own).over(default)
        # one job a turn; a group alone in the turns takes what its limits allow
        cap = room - len(jobs) if len(heads) == 1 else 1
        if rule.concurrency is not None:
            if group_leased >= rule.concurrency:
                db.execute("UPDATE flow_groups SET held = ? WHERE rowid = ?", (_NO_SLOT, rowid))
                continue
            cap = min(cap, rule.concurrency - group_leased)
        if rule.rate is not None:
            group_tokens, group_since = refilled(group_tokens, group_since, now, rule), now
            if group_tokens < 1:
                held = now + max(1, math.ceil(token_wait_ms(group_tokens, rule)))
                db.execute(
                    "UPDATE flow_groups SET held = ?, tokens = ?, refilled_at = ? WHERE rowid = ?",
                    (held, group_tokens, now, rowid),
                )
                continue
            cap = min(cap, math.floor(group_tokens))
        rows = db.execute(READY_SQL, (topic, name or None, cap)).fetchall()
        if not rows:  # a count that went wrong: mended rather than trusted
            db.execute("UPDATE flow_groups SET ready = 0 WHERE rowid = ?", (rowid,))
            continue
        jobs += lease_rows(db, log, topic, rows, ttr_ms, now)
        if group_tokens is not None and rule.rate is not None:
            group_tokens -= len(rows)
        turns += 1
        db.execute(
            "UPDATE flow_groups SET turn = ?, tokens = ?, refilled_at = ? WHERE rowid = ?",
            (turns, group_tokens, group_since, rowid),
        )
    if topic_rule.rate is not None:
        tokens -= len(jobs)
        since = now
    db.execute(
        "UPDATE flow_topics SET turns = ?, tokens = ?, refilled_at = ? WHERE topic = ?",
        (turns, tokens, since, topic),
    )
    return jobs, None if jobs else _token_wait(db, topic, topic_rule, tokens, now)


def _tidy_groups(db: sqlite3.Connection, topic: str, default: Rule, now: int) -> None:
    """Before the turns: groups whose token has come may be served again, and a
    few groups that are only a bucket of the ``default`` rate (no due job,
    lease, pause or rule of their own) are forgotten once it is full again, so
    that groups that came and went leave nothing."""
    db.execute(
        "UPDATE flow_groups SET held = 0 WHERE topic = ? AND held > 0 AND held <= ?", (topic, now)
    )
    if default.rate is None:  # then no group without a rule of its own has a bucket
        return
    refill_ms = (default.bucket or 1) * (default.per or 1.0) * 1000 / default.rate
    db.execute(
        "DELETE FROM flow_groups WHERE rowid IN (SELECT rowid FROM flow_groups WHERE topic = ? "
        "AND ready = 0 AND leased = 0 AND paused = 0 AND rule IS NULL AND refilled_at <= ? "
        "LIMIT 16)",
        (topic, now - math.ceil(refill_ms)),
    )


def _token_wait(
    db: sqlite3.Connection, topic: str, topic_rule: Rule, tokens: float | None, now: int
) -> float | None:
    """Ms until a token lets a job go: the topic's, or a waiting group's."""
    if topic_rule.rate is not None and tokens is not None and tokens < 1:
        return token_wait_ms(tokens, topic_rule)
    held = db.execute(
        "SELECT min(held) FROM flow_groups WHERE topic = ? AND held > 0 "
        "AND ready > 0 AND paused = 0",
        (topic,),
    ).fetchone()[0]
    return None if held is None else max(held - now, 0)


def read_limits(db: sqlite3.Connection, topic: str) -> Limits:
    row = db.execute(
        "SELECT rule, default_rule FROM flow_topics WHERE topic = ?", (topic,)
    ).fetchone()
    if row is None:
        return Limits(topic)
    groups = {
        name: Rule.unpack(text)
        for name, text in db.execute(
            "SELECT grp, rule FROM flow_groups WHERE topic = ? AND rule IS NOT NULL ORDER BY grp",
            (topic,),
        )
    }
    return Limits(topic, Rule.unpack(row[0]), Rule.unpack(row[1]), MappingProxyType(groups))


def write_limits(db: sqlite3.Connection, old: Limits, new: Limits) -> None:
    """Store ``new`` in place of ``old`` (read in the same transaction). A
    bucket whose rule changed is full again; every group is looked at anew."""
    topic = new.topic
    enable(db, topic)
    db.execute(
        "UPDATE flow_topics SET rule = ?, default_rule = ?, "
        "tokens = CASE WHEN ? THEN NULL ELSE tokens END WHERE topic = ?",
        (
            new.topic_rule.pack() or None,
            new.default.pack() or None,
            new.topic_rule != old.topic_rule,
            topic,
        ),
    )
    if new.default != old.default:  # every bucket full again: a group that is only one goes
        db.execute("UPDATE flow_groups SET tokens = NULL WHERE topic = ?", (topic,))
        db.execute(
            "DELETE FROM flow_groups WHERE topic = ? AND ready = 0 AND leased = 0 "
            "AND paused = 0 AND rule IS NULL",
            (topic,),
        )
    for name in set(old.groups) | set(new.groups):
        rule = new.groups.get(name)
        if rule == old.groups.get(name):
            continue
        db.execute(
            "INSERT OR IGNORE INTO flow_groups (topic, grp, turn) "
            "VALUES (?1, ?2, (SELECT turns FROM flow_topics WHERE topic = ?1))",
            (topic, name),
        )
        db.execute(
            "UPDATE flow_groups SET rule = ?, tokens = NULL WHERE topic = ? AND grp = ?",
            (None if rule is None else rule.pack() or None, topic, name),
        )
    db.execute("UPDATE flow_groups SET held = 0 WHERE topic = ? AND held != 0", (topic,))


def set_group_paused(db: sqlite3.Connection, topic: str, group: str, paused: bool) -> None:
    enable(db, topic)
    db.execute(
        "INSERT INTO flow_groups (topic, grp, paused, turn) "
        "VALUES (?1, ?2, ?3, (SELECT turns FROM flow_topics WHERE topic = ?1)) "
        "ON CONFLICT (topic, grp) DO UPDATE SET paused = excluded.paused",
        (topic, group, int(paused)),
    )


def group_counts(db: sqlite3.Connection, topic: str, now: int) -> list[dict[str, Any]]:
    """The topic's groups with the largest backlogs (due jobs), at most
    ``GROUPS_SHOWN``, and its paused groups: due jobs, live leases, paused."""
    counts: dict[str, dict[str, Any]] = {}
    for name, ready, reserved in db.execute(
        "SELECT coalesce(job_group, ''), sum(state = 1 OR (state = 0 AND at <= ?1)), "
        "sum(state = 2) FROM jobs WHERE topic = ?2 AND (state IN (1, 2) "
        "OR (state = 0 AND at <= ?1)) GROUP BY 1",
        (now, topic),
    ):
        counts[name] = {"group": name or None, "ready": ready, "reserved": reserved}
    for (name,) in db.execute(
        "SELECT grp FROM flow_groups WHERE topic = ? AND paused = 1", (topic,)
    ):
        counts.setdefault(name, {"group": name or None, "ready": 0, "reserved": 0})
        counts[name]["paused"] = True
    # as on Redis: the groups with due jobs, and the paused ones
    shown = [g for g in counts.values() if g["ready"] or g.get("paused")]
    ranked = sorted(shown, key=lambda g: (-g["ready"], g["group"] or ""))
    return [{**g, "paused": g.get("paused", False)} for g in ranked[:GROUPS_SHOWN]]


class SQLiteFlow:
    """The flow-control methods of ``SQLiteBackend``."""

    _store: Store
    _signals: FileSignals
    shards = 1

    def limits(self, topic: str) -> Limits:
        with self._store.read() as db:
            return read_limits(db, topic)

    def set_limits(self, topic: str, group: str | None, given: Rule, defaults: Rule) -> Limits:
        with self._store.write() as db:
            old = read_limits(db, topic)
            new = merged(old, group=group, given=given, defaults=defaults, shards=self.shards)
            write_limits(db, old, new)
        self._signals.notify(topic)  # a consumer held up may go on now
        return new

    def clear_limits(self, topic: str, group: str | None) -> Limits:
        with self._store.write() as db:
            old = read_limits(db, topic)
            new = cleared(old, group)
            if new != old:
                write_limits(db, old, new)
        self._signals.notify(topic)
        return new

    def set_group_paused(self, topic: str, group: str, paused: bool) -> None:
        with self._store.write() as db:
            set_group_paused(db, topic, group, paused)
        if not paused:
            self._signals.notify(topic)
