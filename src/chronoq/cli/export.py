"""``chronoq export --to DIR``: the event log into Parquet (chronoq.pipeline.export),
with a progress bar on a terminal and one JSON summary line under --json.

Exit codes: 0 done; 2 bad input (options, a directory of another store or
one that cannot be written, no pyarrow); 3 store unavailable; 4 events were
trimmed from the store before they were exported (everything read before
them is exported and committed; --allow-gaps records the loss and goes on)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from chronoq.cli.app import App, Command, pass_app
from chronoq.cli.output import message
from chronoq.errors import InvalidInput

__all__ = ["EXIT_GAP", "export"]

EXIT_GAP = 4

EPILOG = """\b
Files: DIR/topic=<topic>/date=<YYYY-MM-DD>/part-*.parquet (UTC dates); the
offsets are in DIR/_chronoq/export.json and advance only once the files they
cover are on disk, so a run killed at any point and started again exports
every event exactly once. Read DIR with chronoq.pipeline.read_events(spark, DIR)
or spark.read.parquet(DIR).

\b
Exit codes: 0 done; 2 bad input; 3 store unavailable; 4 events were trimmed
from the store before they were exported (see --allow-gaps).
"""


def _pipeline() -> Any:
    try:
        from chronoq.pipeline import export as pipeline_export
    except ImportError as exc:  # pyarrow is optional: the spark extra
        raise InvalidInput(
            f"chronoq export writes Parquet with pyarrow: pip install 'chronoq[spark]' ({exc})"
        ) from None
    return pipeline_export


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT end the run after committing what was read."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@click.command(cls=Command, epilog=EPILOG)
@click.option(
    "--to",
    "directory",
    metavar="DIR",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of the export (created if missing; runs resume where the last ended).",
)
@click.option("--topic", help="Export the events of this topic only.")
@click.option("--follow", is_flag=True, help="Keep exporting new events until SIGTERM/Ctrl-C.")
@click.option("--trim", is_flag=True, help="Delete exported events from the store.")
@click.option("--allow-gaps", is_flag=True, help="Go on past events the store already trimmed.")
@click.option(
    "--flush-events",
    type=click.IntRange(1, 10_000_000),
    default=200_000,
    show_default=True,
    help="Events per flush at most (a flush writes a file per partition).",
)
@click.option(
    "--flush-interval",
    type=click.FloatRange(0.1, 86_400),
    default=10.0,
    show_default=True,
    help="With --follow: seconds between flushes at most.",
)
@pass_app
def export(
    app: App,
    directory: Path,
    topic: str | None,
    follow: bool,
    trim: bool,
    allow_gaps: bool,
    flush_events: int,
    flush_interval: float,
) -> None:
    """Export the event log into Parquet files under DIR, incrementally.

    Each run exports the events logged since the last one; with --follow it
    keeps up with new ones, flushing every --flush-events events or
    --flush-interval seconds.
    """
    pipeline_export = _pipeline()
    queue = app.queue()
    if topic is not None:
        queue.log_shards(topic)  # checks the name before anything is written
    stop = threading.Event()
    show = app.out.stderr.is_terminal and not app.out.as_json
    columns: list[Any] = [SpinnerColumn(), TextColumn("exporting"), MofNCompleteColumn()]
    if not follow:
        columns += [BarColumn(), TimeRemainingColumn()]
    with Progress(
        *columns, TimeElapsedColumn(), console=app.out.stderr, disable=not show, transient=True
    ) as progress:
        task = progress.add_task("export", total=None)
        exporter = pipeline_export.Exporter(
            queue,
            directory,
            topic=topic,
            allow_gaps=allow_gaps,
            trim=trim,
            flush_events=flush_events,
            on_events=lambda n: progress.advance(task, n),
        )
        if show and not follow:
            progress.update(task, total=exporter.backlog())
        with _stop_on_signals(stop):
            try:
                summary = exporter.run(follow=follow, flush_interval=flush_interval, stop=stop)
            except pipeline_export.ExportGap as lost:
                _gap_exit(app, lost, directory)
            except OSError as exc:  # the directory: permissions, a full disk
                raise InvalidInput(f"cannot write the export in {directory}: {exc}") from None
    for gap in summary.gaps:
        app.out.error(f"Warning: {pipeline_export.describe_gap(gap)} (allowed by --allow-gaps)")
    _report(app, summary, directory)


def _report(app: App, summary: Any, directory: Path) -> None:
    doc = summary.doc()
    rate = f"{doc['events_per_second']:,} events/s"
    app.out.emit(
        {"to": str(directory), **doc},
        lambda: message(
            f"exported {summary.events:,} event(s) in {summary.files} file(s) to {directory} "
            f"({summary.seconds:.1f} s, {rate})"
        ),
    )


def _gap_exit(app: App, gap: Any, directory: Path) -> None:
    app.out.error(
        f"Error: {gap}. Everything before it is exported to {directory}. Size the store's "
        "log for the time between exports (events_max, events_keep), or run "
        "`chronoq export --follow`; to go on without those events, pass --allow-gaps."
    )
    app.out.json_only({"to": str(directory), "error": "gap", "gaps": gap.gaps})
    click.get_current_context().exit(EXIT_GAP)
