"""``chronoq serve``: the HTTP JSON service; ``chronoq token``: a new bearer
token and the TOML lines that grant it. The server's packages are the
``server`` extra, imported only when the command runs."""

from __future__ import annotations

import click
from rich.console import Console
from rich.text import Text

import chronoq
from chronoq.backends.url import StoreURL, redacted
from chronoq.cli.app import EXIT_BAD_INPUT, STORE_HELP, App, pass_app
from chronoq.errors import BackendUnavailable

__all__ = ["serve", "token"]

_ACTIONS = ("put", "reserve", "read", "admin")


def _banner(console: Console, store: str, host: str, port: int, root: str, tls: bool) -> None:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    base = f"{'https' if tls else 'http'}://{shown}:{port}{root.rstrip('/')}"
    console.print(
        Text.assemble(("chronoq serve", "bold"), f"  store {store}"),
        soft_wrap=True,
        highlight=False,
    )
    console.print(f"API  {base}/v1   docs {base}/docs", soft_wrap=True)
    console.print(f"dashboard  {base}/ui/      metrics {base}/metrics", soft_wrap=True)
    console.print(
        f"try:  curl -s -X POST {base}/v1/topics/hello/jobs -H 'content-type: application/json' "
        '-d \'{"payload": {"hi": 1}, "delay": 2}\'',
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"      curl -s -X POST {base}/v1/topics/hello/reserve -d '{{\"wait\": 5}}'",
        highlight=False,
        soft_wrap=True,
    )


@click.command()
@click.option("--store", metavar="URL", help=STORE_HELP)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=7070,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on.",
)
@click.option(
    "--config",
    "config",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="TOML file: [[tokens]], [limits], [ui] (see docs/http.md).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Server processes sharing the port (and the store).",
)
@click.option("--root-path", default="", help="URL prefix when served behind a proxy.")
@click.option(
    "--pop-wait",
    type=click.FloatRange(0, 3600),
    default=None,
    metavar="SECONDS",
    help="How long the ouqiang /pop holds a request [default: 178].",
)
@click.option("--insecure", is_flag=True, help="Allow a non-loopback --host without tokens.")
@click.option("--access-log", is_flag=True, help="Log every request.")
@click.option("--ssl-keyfile", type=click.Path(exists=True, dir_okay=False), default=None,
              help="TLS: the private key (PEM); serves HTTPS with --ssl-certfile.")  # fmt: skip
@click.option("--ssl-certfile", type=click.Path(exists=True, dir_okay=False), default=None,
              help="TLS: the certificate chain (PEM).")  # fmt: skip
@click.option("--ssl-keyfile-password", default=None, help="TLS: the key's password.")
@click.option("--ssl-ca-certs", type=click.Path(exists=True, dir_okay=False), default=None,
              help="TLS: CA certificates to verify clients with.")  # fmt: skip
@pass_app
def serve(
    app: App,
    store: str | None,
    host: str,
    port: int,
    config: str | None,
    workers: int,
    root_path: str,
    pop_wait: float | None,
    insecure: bool,
    access_log: bool,
    ssl_keyfile: str | None,
    ssl_certfile: str | None,
    ssl_keyfile_password: str | None,
    ssl_ca_certs: str | None,
) -> None:
    """Serve the HTTP JSON API, the dashboard and /metrics on one store.

    Without --config (tokens) it listens on loopback only. SIGTERM answers
    waiting long polls with no jobs and stops after the requests in flight.
    """
    try:
        from chronoq.server.serving import ServeOptions, check_exposure, run
    except ImportError as exc:
        raise click.ClickException(
            f"chronoq serve needs the server extra ({exc.name} is missing): "
            "pip install 'chronoq[server]'"
        ) from None
    ssl = {
        key: value
        for key, value in {
            "ssl_keyfile": ssl_keyfile,
            "ssl_certfile": ssl_certfile,
            "ssl_keyfile_password": ssl_keyfile_password,
            "ssl_ca_certs": ssl_ca_certs,
        }.items()
        if value is not None
    }
    # one store option for every command: after `serve`, before it, or
    # $CHRONOQ_STORE (which the group's option reads), else the default
    url = StoreURL.parse(store or app.store).raw
    options = ServeOptions(
        url, host, port, config, workers, root_path, insecure, pop_wait, access_log, ssl=ssl
    )
    settings = options.settings()
    check_exposure(options, settings)  # a bad config or host: exit 2 before binding
    try:
        with chronoq.connect(url) as queue:  # a bad store URL: exit 2 here too
            shown = queue.url  # without a password
    except BackendUnavailable:  # down for now: /healthz says so until it is back
        shown = redacted(url)
    _banner(Console(stderr=True), shown, host, port, root_path, bool(ssl_certfile))
    run(options, settings)


@click.command()
@click.option("--name", required=True, help="A name for the token (shown in 403 answers).")
@click.option(
    "--topics",
    default="*",
    show_default=True,
    help="Comma-separated topic globs the token may touch.",
)
@click.option(
    "--actions",
    default="put,reserve,read",
    show_default=True,
    help=f"Comma-separated actions from {', '.join(_ACTIONS)}.",
)
def token(name: str, topics: str, actions: str) -> None:
    """Make a new bearer token; print it once, and the [[tokens]] entry
    (its SHA-256 digest, not the token) to add to the server's config."""
    from chronoq.server.auth import hash_token, new_token

    wanted = [a.strip() for a in actions.split(",") if a.strip()]
    bad = [a for a in wanted if a not in _ACTIONS]
    if bad or not wanted:
        click.echo(f"Error: unknown actions {bad}; choose from {', '.join(_ACTIONS)}", err=True)
        click.get_current_context().exit(EXIT_BAD_INPUT)
    globs = [t.strip() for t in topics.split(",") if t.strip()] or ["*"]
    secret = new_token()
    console = Console()
    console.print(
        f"# the token (shown once; give it to the client): {secret}",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        "[[tokens]]\n"
        f'name = "{name}"\n'
        f'sha256 = "{hash_token(secret)}"\n'
        f"topics = {globs!r}\n".replace("'", '"')
        + f"actions = {wanted!r}".replace("'", '"'),
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
