"""Which facade offers which operation: each is listed once here, and
``Queue``, ``AsyncQueue``, ``chronoq.http.Client`` and ``AsyncClient``
inherit the lists. ``tests/test_surface.py`` holds the four to it, with
the differences that are meant."""

from __future__ import annotations

from chronoq.calls.by_id import Delete, Get, Reschedule
from chronoq.calls.call import Op
from chronoq.calls.consuming import Ack, AckMany, Bury, Nack, Release, Reserve, Touch
from chronoq.calls.flow import ClearLimits, SetLimits, TopicLimits
from chronoq.calls.producing import Put, PutMany
from chronoq.calls.reading import Jobs, LogHead, LogShards, LogTrim, ReadLog
from chronoq.calls.recurring import DefineRecurring, RecurringList, RecurringRemove, RunRecurring
from chronoq.calls.topicwide import (
    Dead,
    DueForecast,
    Events,
    Pause,
    Purge,
    Requeue,
    Resume,
    Stats,
    Topics,
)

__all__ = ["Operations", "StoreOperations"]


class Operations:
    """The operations of every facade, the HTTP clients included."""

    put = Op(Put)
    put_many = Op(PutMany)

    reserve = Op(Reserve)
    ack = Op(Ack)
    ack_many = Op(AckMany)
    nack = Op(Nack)
    release = Op(Release)
    touch = Op(Touch)
    bury = Op(Bury)

    get = Op(Get)
    delete = Op(Delete)
    reschedule = Op(Reschedule)

    stats = Op(Stats)
    forecast = Op(DueForecast)
    topics = Op(Topics)
    dead = Op(Dead)
    requeue = Op(Requeue)
    purge = Op(Purge)
    pause = Op(Pause)
    resume = Op(Resume)

    set_limits = Op(SetLimits)
    limits = Op(TopicLimits)
    clear_limits = Op(ClearLimits)


class StoreOperations(Operations):
    """The operations of the facades on a store (``Queue``, ``AsyncQueue``)
    that the HTTP API does not serve."""

    events = Op(Events)

    jobs = Op(Jobs)
    log_shards = Op(LogShards)
    log_read = Op(ReadLog)
    log_head = Op(LogHead)
    log_trim = Op(LogTrim)

    recurring = Op(DefineRecurring)
    recurring_list = Op(RecurringList)
    recurring_remove = Op(RecurringRemove)
    run_recurring = Op(RunRecurring)
