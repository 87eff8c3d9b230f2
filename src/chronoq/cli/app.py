"""Setup shared by the ``chronoq`` commands: the per-invocation ``App``
object, the command and group classes that add ``--store``/``--json`` after a
command's name, and the mapping of errors to one line on stderr and an exit
code (0 ok; 1 nothing found; 2 bad input; 3 store unavailable)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import click

import chronoq
from chronoq.cli import output
from chronoq.errors import BackendUnavailable, ChronoqError, InvalidInput, LeaseLost, NotFound

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_NOT_FOUND",
    "EXIT_STORE",
    "JSON_HELP",
    "STORE_HELP",
    "App",
    "Command",
    "Group",
    "pass_app",
]

EXIT_NOT_FOUND, EXIT_BAD_INPUT, EXIT_STORE = 1, 2, 3
log = logging.getLogger("chronoq")


class App:
    """Per-invocation state: the store URL, the output mode, the open queue."""

    def __init__(self, store: str | None = None, as_json: bool = False) -> None:
        self.store = store
        self.out = output.Output(as_json)
        self._queue: chronoq.Queue | None = None

    def queue(self) -> chronoq.Queue:
        if self._queue is None:
            self._queue = chronoq.connect(self.store)
            log.debug("opened store %s", self._queue.url)
        return self._queue

    def close(self) -> None:
        if self._queue is not None:
            self._queue.close()

    def nothing(self, text: str) -> NoReturn:
        """Report that nothing was found and exit 1."""
        self.out.error(text)
        click.get_current_context().exit(EXIT_NOT_FOUND)


pass_app = click.make_pass_decorator(App)


def _set_store(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(App).store = value


def _set_json(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(App).out.as_json = True


STORE_HELP = "Store URL, e.g. sqlite:///jobs.db [env CHRONOQ_STORE; default sqlite:///chronoq.db]."
JSON_HELP = "Print one JSON document on stdout (times in ms since the epoch)."


class Command(click.Command):
    """A command that also takes --store and --json after its name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        store = click.Option(["--store"], metavar="URL", callback=_set_store, help=STORE_HELP)
        as_json = click.Option(["--json"], is_flag=True, callback=_set_json, help=JSON_HELP)
        for option in (store, as_json):
            option.expose_value = False
            self.params.append(option)


def _fail(out: Callable[[str], None], exc: BaseException) -> int:
    """The exit code for an error, after one line on stderr."""
    if isinstance(exc, click.UsageError):
        hint = f"; see '{exc.ctx.command_path} --help'" if exc.ctx else ""
        out(f"Error: {exc.format_message().rstrip('.')}{hint}.")
        return EXIT_BAD_INPUT
    if isinstance(exc, click.ClickException):
        out(f"Error: {exc.format_message()}")
        return exc.exit_code
    if isinstance(exc, InvalidInput):
        out(f"Error: {exc}")
        return EXIT_BAD_INPUT
    if isinstance(exc, LeaseLost | NotFound):
        out(f"Error: {exc}")
        return EXIT_NOT_FOUND
    what = "store unavailable" if isinstance(exc, BackendUnavailable) else type(exc).__name__
    out(f"Error: {what}: {exc}")
    return EXIT_STORE


class Group(click.Group):
    """The root group: turns usage errors and chronoq errors into one line on
    stderr and an exit code, never a traceback."""

    command_class = Command

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        extra["windows_expand_args"] = windows_expand_args
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        err = output.Output().error
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.Abort:
            err("Aborted.")
            code = 1
        except (click.ClickException, ChronoqError) as exc:
            code = _fail(err, exc)
        sys.exit(code if isinstance(code, int) else 0)
