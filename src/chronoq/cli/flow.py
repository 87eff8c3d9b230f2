"""Flow control from the command line: ``chronoq limits`` shows, sets and
clears a topic's limits; ``chronoq pause`` and ``chronoq resume`` stop and
restart a topic, or one group of it (docs/contract.md §10)."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Group as Lines
from rich.console import RenderableType

from chronoq.cli import output
from chronoq.cli.app import App, Command, pass_app
from chronoq.cli.parsing import parse_duration
from chronoq.limits import Limits

__all__ = ["limits", "pause", "resume"]

EPILOG = """\b
Examples:
  chronoq limits emails                       show
  chronoq limits emails --rate 200 --burst 20 --concurrency 50
  chronoq limits emails --group-rate 5        every group's default
  chronoq limits emails --group acme --rate 50
  chronoq limits emails --clear [--group acme]

\b
Each option set changes that field alone; the others keep their values. A
group's own limits replace the group defaults field by field. On a sharded
topic each shard enforces its share.
"""


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _per(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    return None if value is None else parse_duration(ctx, param, value)


def _check(group: str | None, clear: bool, given: dict[str, Any]) -> None:
    """The combinations of options that ``set_limits`` would refuse in
    Python's words, refused in the command's."""
    if clear and given:
        names = ", ".join(_option(name) for name in given)
        raise click.UsageError(f"--clear takes no limits to set (got {names}): give one or other")
    defaults = [_option(name) for name in given if name.startswith("group_")]
    if group is not None and defaults:
        raise click.UsageError(
            f"{', '.join(defaults)} set(s) every group's default, not one group's: drop "
            f"--group to set the defaults, or give {defaults[0].replace('group-', '')} "
            f"for group {group}'s own"
        )
    if group is not None and not clear and not given:
        raise click.UsageError(
            "--group needs limits to set (--rate, --per, --burst, --concurrency) or --clear; "
            "without --group the command shows every group's limits"
        )


@click.command(cls=Command, epilog=EPILOG)
@click.argument("topic")
@click.option("--group", help="Set or clear this group's own limits instead of the topic's.")
@click.option("--rate", type=float, metavar="N", help="Jobs handed out per --per.")
@click.option("--per", callback=_per, metavar="DURATION",
              help="The rate's period: seconds, or 1m, 1h, 1d [1 s].")  # fmt: skip
@click.option("--burst", type=int, metavar="N", help="Token bucket [--per's worth of --rate].")
@click.option("--concurrency", type=int, metavar="N", help="Most jobs under a live lease at once.")
@click.option("--group-rate", type=float, metavar="N", help="Every group's default --rate.")
@click.option("--group-per", callback=_per, metavar="DURATION", help="Every group's default --per.")
@click.option("--group-burst", type=int, metavar="N", help="Every group's default --burst.")
@click.option("--group-concurrency", type=int, metavar="N",
              help="Every group's default --concurrency.")  # fmt: skip
@click.option(
    "--clear", is_flag=True, help="Clear the topic's limits and group defaults (or --group's)."
)
@pass_app
def limits(app: App, /, topic: str, group: str | None, clear: bool, **fields: Any) -> None:
    """Show, set or clear the flow-control limits of TOPIC.

    With no limit given, show the topic's own, the group defaults and each
    group's own. --rate jobs per --per seconds, from a bucket of --burst;
    --concurrency jobs under a live lease at once. Prints the limits after
    a change.
    """
    given = {name: value for name, value in fields.items() if value is not None}
    _check(group, clear, given)
    queue = app.queue()
    if clear:
        found = queue.clear_limits(topic, group)
    elif given:
        found = queue.set_limits(topic, group=group, **given)
    else:
        found = queue.limits(topic)
    app.out.emit(found.as_dict(), lambda: _view(found, group, clear))


def _view(found: Limits, group: str | None, clear: bool) -> RenderableType:
    view = output.limits_view(found)
    if not clear:
        return view
    what = f"group {group}'s own limits" if group else "the topic's limits and group defaults"
    return Lines(output.message(f"cleared {what} of {found.topic}"), view)


def _set_paused(app: App, topic: str, group: str | None, paused: bool) -> None:
    queue = app.queue()
    (queue.pause if paused else queue.resume)(topic, group=group)
    # the key is left out for a whole topic: documents from before groups stay as they were
    doc: dict[str, Any] = {"topic": topic, **({} if group is None else {"group": group})}
    what = topic if group is None else f"group {group} of {topic}"
    verb = "paused" if paused else "resumed"
    app.out.emit({**doc, "paused": paused}, lambda: output.message(f"{verb} {what}"))


group_opt = click.option("--group", help="Only this group of TOPIC; the other groups flow on.")


@click.command(cls=Command)
@click.argument("topic")
@group_opt
@pass_app
def pause(app: App, topic: str, group: str | None) -> None:
    """Stop handing out jobs of TOPIC, or of one --group (puts are still accepted)."""
    _set_paused(app, topic, group, True)


@click.command(cls=Command)
@click.argument("topic")
@group_opt
@pass_app
def resume(app: App, topic: str, group: str | None) -> None:
    """Hand out jobs of a paused TOPIC, or of its paused --group, again."""
    _set_paused(app, topic, group, False)
