"""What the views' shared widgets show, as values: an action button and a
pager. Their markup is in templates/macros.html (with the table and the
badge, which need no value of their own)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Button", "Pager"]


@dataclass(frozen=True)
class Button:
    """A button that POSTs to ``path`` and shows the answer in the flash
    area; the answer's ``chronoq-changed`` event refreshes the lists.
    ``confirm``: a question the browser asks first."""

    label: str
    path: str
    confirm: str | None = None
    danger: bool = False


@dataclass(frozen=True)
class Pager:
    """Buttons that load a list's first, previous or next page into its place
    (the list fragment is the closest ``.pageable`` element): the URL of
    each page there is (None: no button), and where this page is."""

    first: str | None
    previous: str | None
    following: str | None
    where: str = ""
