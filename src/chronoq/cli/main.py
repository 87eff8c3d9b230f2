"""The ``chronoq`` command: a click group over the public ``Queue`` API.

Exit codes: 0 ok; 1 nothing found (a missing job, an empty reserve, a lost
lease); 2 bad input; 3 the store is unavailable (cannot be opened, corrupt,
read-only) or did not confirm a write. The setup shared by the commands is in
``chronoq.cli.app``, the parsing of their input in ``chronoq.cli.parsing``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import IO, Any

import click
from rich.logging import RichHandler

import chronoq
from chronoq.cli import output
from chronoq.cli.analyze import analyze
from chronoq.cli.app import (
    EXIT_BAD_INPUT,
    EXIT_NOT_FOUND,
    EXIT_STORE,
    JSON_HELP,
    STORE_HELP,
    App,
    Group,
    pass_app,
)
from chronoq.cli.demo import run_demo
from chronoq.cli.export import export
from chronoq.cli.flow import limits, pause, resume
from chronoq.cli.parsing import (
    check_one_time,
    parse_duration,
    parse_payload,
    parse_run_at,
    parse_until,
)
from chronoq.cli.serve import serve, token
from chronoq.cli.worker import worker

__all__ = ["EXIT_BAD_INPUT", "EXIT_NOT_FOUND", "EXIT_STORE", "cli", "main"]

log = logging.getLogger("chronoq")

EPILOG = """\b
Exit codes: 0 ok; 1 nothing found (missing job, empty reserve, lost lease);
2 bad input; 3 store unavailable (cannot open, corrupt, read-only); 4 export:
events were trimmed from the store before they were exported.
"""


@click.group(cls=Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", metavar="URL", envvar="CHRONOQ_STORE", help=STORE_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages of chronoq to stderr.")
@click.version_option(chronoq.__version__, prog_name="chronoq")
@click.pass_context
def cli(ctx: click.Context, store: str | None, as_json: bool, verbose: bool) -> None:
    """chronoq: a delay queue. Put jobs due later; reserve, ack, inspect them."""
    app = ctx.ensure_object(App)
    app.store, app.out.as_json = store, as_json
    ctx.call_on_close(app.close)
    if verbose:
        handler = RichHandler(console=app.out.stderr, show_path=False)
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
        ctx.call_on_close(lambda: log.removeHandler(handler))


topic_arg = click.argument("topic")
id_arg = click.argument("job_id", metavar="ID")
delay_opt = click.option("--delay", type=float, help="Seconds from now until due (ms resolution).")
run_at_opt = click.option(
    "--run-at",
    metavar="TIME",
    callback=parse_run_at,
    help="ISO 8601 (no zone = UTC) or epoch seconds.",
)


@cli.command()
@topic_arg
@click.argument("payload", metavar="[PAYLOAD_JSON]", required=False)
@click.option(
    "--payload-file", type=click.File("r"), help="Read the JSON payload from a file (- is stdin)."
)
@delay_opt
@run_at_opt
@click.option("--id", help="Job id (default: a new ULID); a put of an existing id is a no-op.")
@click.option("--priority", type=int, default=0, show_default=True, help="-1000..1000, high first.")
@click.option("--ttr", type=float, default=30.0, show_default=True, help="Lease length, seconds.")
@click.option("--max-attempts", type=int, default=5, show_default=True, help="Tries before dead.")
@click.option("--unique-for", type=float, default=0.0, help="Seconds to remember the id after ack.")
@click.option("--replace", is_flag=True, help="Replace a job with this id (unless reserved).")
@click.option("--group", help="The job's group within TOPIC (a tenant, say); default: none.")
@pass_app
def put(
    app: App, /, topic: str, payload: str | None, payload_file: IO[str] | None, **opts: Any
) -> None:
    """Put a job on TOPIC: due now, after --delay or at --run-at.

    PAYLOAD_JSON is a JSON value, e.g. '{"order": 42}' or '"text"' (default null).
    """
    check_one_time(opts["delay"], opts["run_at"], required=False)
    result = app.queue().put(topic, parse_payload(payload, payload_file), **opts)
    verb = ("put", "green") if result.created else ("exists, left as it was", "yellow")
    due = f" on {topic}: due {output.iso_ms(result.due_at)} ({output.relative(result.due_at)})"
    app.out.emit(output.put_doc(topic, result), lambda: output.message(f"{result.id} ", verb, due))


@cli.command()
@topic_arg
@click.option("--count", "-n", type=int, default=1, show_default=True, help="Most jobs to lease.")
@click.option("--wait", type=float, default=0.0, show_default=True, help="Seconds to wait for one.")
@click.option("--ttr", type=float, help="Lease length in seconds (default: each job's own).")
@pass_app
def reserve(app: App, topic: str, count: int, wait: float, ttr: float | None) -> None:
    """Lease due jobs of TOPIC, highest priority first.

    Exit 1 if none came within --wait. Finish each job with ack (or nack,
    touch, bury) and its id and lease before its deadline, or it is
    delivered again.
    """
    jobs = app.queue().reserve(topic, count, wait=wait, ttr=ttr)
    if jobs or app.out.as_json:
        docs = [output.reservation_doc(job) for job in jobs]
        app.out.emit(docs, lambda: output.reservations_table(jobs))
    if not jobs:
        app.nothing(f"no job of topic {topic} was due (waited {wait:g} s)")


lease_args = [topic_arg, id_arg, click.argument("lease")]


def _lease_command(func: Callable[..., None]) -> Callable[..., None]:
    for decorator in reversed(lease_args):
        func = decorator(func)
    return cli.command()(pass_app(func))


def _done(app: App, topic: str, job_id: str, what: str, **doc: Any) -> None:
    app.out.emit(
        {"topic": topic, "id": job_id, **doc},
        lambda: output.message(f"{job_id} ", (what, "green"), f" on {topic}"),
    )


@_lease_command
def ack(app: App, topic: str, job_id: str, lease: str) -> None:
    """Finish a reserved job: it is gone.

    Exit 1 if the lease was lost (expired, or the job was reserved again).
    """
    app.queue().ack(topic, job_id, lease)
    _done(app, topic, job_id, "acked", acked=True)


@click.option("--delay", type=float, help="Seconds until it is due again (default: backoff).")
@click.option("--error", help="Why it failed (kept as last_error).")
@_lease_command
def nack(
    app: App, topic: str, job_id: str, lease: str, delay: float | None, error: str | None
) -> None:
    """Give a reserved job back, to run again later.

    It goes to dead instead when its attempts are used up.
    """
    state = app.queue().nack(topic, job_id, lease, delay=delay, error=error)
    _done(app, topic, job_id, f"nacked: now {state.value}", state=state.value)


@click.option("--ttr", type=float, help="New lease length from now (default: the job's ttr).")
@_lease_command
def touch(app: App, topic: str, job_id: str, lease: str, ttr: float | None) -> None:
    """Extend the lease of a reserved job."""
    deadline = app.queue().touch(topic, job_id, lease, ttr=ttr)
    _done(app, topic, job_id, f"leased until {output.iso_ms(deadline)}", deadline=deadline)


@click.option("--error", help="Why it is buried (kept as last_error).")
@_lease_command
def bury(app: App, topic: str, job_id: str, lease: str, error: str | None) -> None:
    """Move a reserved job to dead, for inspection and requeue."""
    app.queue().bury(topic, job_id, lease, error=error)
    _done(app, topic, job_id, "buried", state="dead")


@cli.command()
@topic_arg
@id_arg
@pass_app
def get(app: App, topic: str, job_id: str) -> None:
    """Show one job of TOPIC, in any state.

    Exit 1 if there is none.
    """
    info = app.queue().get(topic, job_id)
    if info is None:
        app.out.json_only(None)
        app.nothing(f"no job {job_id} on topic {topic}")
    app.out.emit(output.info_doc(info), lambda: output.info_table(info))


@cli.command()
@topic_arg
@id_arg
@pass_app
def delete(app: App, topic: str, job_id: str) -> None:
    """Delete one job of TOPIC, in any state.

    Exit 1 if there was none.
    """
    if not app.queue().delete(topic, job_id):
        app.out.json_only({"topic": topic, "id": job_id, "deleted": False})
        app.nothing(f"no job {job_id} on topic {topic}")
    _done(app, topic, job_id, "deleted", deleted=True)


@cli.command()
@topic_arg
@id_arg
@delay_opt
@run_at_opt
@pass_app
def reschedule(
    app: App, topic: str, job_id: str, delay: float | None, run_at: datetime | float | None
) -> None:
    """Move a delayed or ready job to a new due time.

    Exit 1 if the job is absent, reserved or dead.
    """
    check_one_time(delay, run_at, required=True)
    queue = app.queue()
    if not queue.reschedule(topic, job_id, delay=delay, run_at=run_at):
        app.out.json_only({"topic": topic, "id": job_id, "rescheduled": False})
        app.nothing(
            f"job {job_id} on topic {topic} was not rescheduled: it is absent, reserved or dead"
        )
    info = queue.get(topic, job_id)
    due = None if info is None else info.due_at
    _done(app, topic, job_id, f"due {output.iso_ms(due)}", rescheduled=True, due_at=due)


@cli.command()
@topic_arg
@click.option("--groups", is_flag=True, help="Also count by group, largest backlog first.")
@pass_app
def stats(app: App, topic: str, groups: bool) -> None:
    """Count the jobs of TOPIC by state (and by group)."""
    counts = app.queue().stats(topic, groups=groups)
    app.out.emit({"topic": topic, **counts}, lambda: output.stats_view(topic, counts))


@cli.command()
@topic_arg
@click.option("--until", default="1d", show_default=True, callback=parse_until, metavar="WHEN",
              help="A duration from now (90m, 12h, 30d, seconds) or an ISO 8601 time.")  # fmt: skip
@click.option("--step", default="1h", show_default=True, callback=parse_duration,
              metavar="DURATION", help="The length of a step (30m, 1h, 1d, seconds).")  # fmt: skip
@pass_app
def forecast(app: App, topic: str, until: datetime | timedelta, step: float) -> None:
    """Count the delayed jobs of TOPIC falling due in each step until --until."""
    if isinstance(until, timedelta):
        until = datetime.now(UTC) + until
    found = app.queue().forecast(topic, until=until, step=step)
    app.out.emit(output.forecast_doc(found), lambda: output.forecast_view(found))


@cli.command()
@pass_app
def topics(app: App) -> None:
    """List every topic with its counts by state."""
    queue = app.queue()
    rows = [(name, queue.stats(name)) for name in queue.topics()]
    app.out.emit(
        [{"topic": name, **counts} for name, counts in rows], lambda: output.topics_table(rows)
    )


@cli.command()
@topic_arg
@click.option("--limit", type=int, default=100, show_default=True, help="Most jobs to show.")
@pass_app
def dead(app: App, topic: str, limit: int) -> None:
    """List the dead jobs of TOPIC, oldest death first."""
    jobs = app.queue().dead(topic, limit)
    app.out.emit([output.info_doc(info) for info in jobs], lambda: output.dead_table(jobs))


@cli.command()
@topic_arg
@click.argument("ids", metavar="[ID]...", nargs=-1)
@pass_app
def requeue(app: App, topic: str, ids: tuple[str, ...]) -> None:
    """Move dead jobs of TOPIC (all, or the IDs given) back to ready.

    Exit 1 when IDs were given and none of them was dead.
    """
    moved = app.queue().requeue(topic, list(ids) if ids else None)
    app.out.emit(
        {"topic": topic, "requeued": moved},
        lambda: output.message(f"requeued {moved} dead job(s) of {topic}"),
    )
    if ids and not moved:
        app.nothing(f"none of the {len(ids)} job(s) given is dead on topic {topic}")


@cli.command()
@topic_arg
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def purge(app: App, topic: str, yes: bool) -> None:
    """Delete every job of TOPIC, in every state."""
    if not yes:
        click.confirm(f"Delete every job of topic {topic}?", abort=True, err=True)
    count = app.queue().purge(topic)
    app.out.emit(
        {"topic": topic, "purged": count},
        lambda: output.message(f"purged {count} job(s) of {topic}"),
    )


@cli.command()
@click.option("--jobs", type=click.IntRange(1, 10_000), default=300, help="Jobs to schedule [300].")
@click.option("--seconds", type=click.FloatRange(0.5, 600), default=10.0, help="Due within [10].")
@pass_app
def demo(app: App, jobs: int, seconds: float) -> None:
    """Watch jobs being delivered on time, live.

    Schedules --jobs jobs with mixed delays and priorities, due within
    --seconds, on a throwaway topic; a consumer blocked in reserve(wait=...)
    takes and acks them while a table shows each delivery's lag. The topic is
    purged at the end. Exit 1 if any job came early or not at all.
    """
    report = run_demo(
        app.queue(), app.out.stdout, jobs=jobs, seconds=seconds, live=not app.out.as_json
    )
    if app.out.as_json:
        app.out.json_only(report.doc())
    if not report.ok:
        click.get_current_context().exit(EXIT_NOT_FOUND)


cli.add_command(worker)
cli.add_command(export)
cli.add_command(analyze)
cli.add_command(serve)
cli.add_command(token)
cli.add_command(limits)
cli.add_command(pause)
cli.add_command(resume)


def main() -> None:
    """The console script."""
    cli(prog_name="chronoq")


if __name__ == "__main__":
    main()
