"""The dashboard's markup: the Jinja2 templates of templates/, rendered by
one Environment made when this module is imported (the one module-level
object of the dashboard: configuration, no state of a request).

Every value a template prints is escaped (``autoescape``), so a topic, a job
id, a payload or an error reaches the page as text; no template marks a
value safe, and the Python side hands over plain values (view models), not
markup. A value is data, never template source, so ``{{7*7}}`` in a payload
is shown as it is. A name a template uses and its view model lacks raises
(``StrictUndefined``), in the tests, rather than leave a gap on a page. Each
template is compiled at its first render and kept; ``auto_reload`` is off,
so a render reads no file and checks no modification time."""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["render"]

_ENV = Environment(
    loader=PackageLoader(__package__ or "chronoq.server.ui", "templates"),
    autoescape=True,  # every template is .html or .svg
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,
)


def render(name: str, /, **context: object) -> str:
    """The template ``name`` (a file of templates/) filled in with ``context``."""
    return _ENV.get_template(name).render(context)
