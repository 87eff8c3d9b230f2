"""Small pieces the views share: action buttons, pagers, tables, badges."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from chronoq.server.ui.markup import Html, join, render

__all__ = ["action", "badge", "pager", "table"]


def action(label: str, path: str, *, confirm: str | None = None, danger: bool = False) -> Html:
    """A button that POSTs to ``path`` and shows the answer in the flash
    area; the answer's ``chronoq-changed`` event refreshes the lists."""
    extra = render(' hx-confirm="{text}"', text=confirm) if confirm else Html("")
    return render(
        '<button type="button" class="act{cls}" hx-post="{path}" hx-target="#flash" '
        'hx-swap="innerHTML"{extra}>{label}</button>',
        cls=" danger" if danger else "",
        path=path,
        extra=extra,
        label=label,
    )


def pager(first: str | None, previous: str | None, following: str | None, where: str = "") -> Html:
    """Buttons that load a list's first, previous or next page into its place
    (the list fragment is the closest ``.pageable`` element)."""
    buttons = []
    for label, path in (("« first", first), ("‹ previous", previous), ("next ›", following)):
        if path is not None:
            buttons.append(
                render(
                    '<button type="button" class="page" hx-get="{path}" '
                    'hx-target="closest .pageable" hx-swap="outerHTML">{label}</button>',
                    path=path,
                    label=label,
                )
            )
    if not buttons and not where:
        return Html("")
    return render(
        '<nav class="pager">{buttons}<span>{where}</span></nav>', buttons=join(buttons), where=where
    )


def table(css: str, headers: Sequence[str], rows: Iterable[Html], empty: str) -> Html:
    body = join(rows)
    if not body:
        return render('<p class="empty">{empty}</p>', empty=empty)
    head = join(render("<th>{h}</th>", h=h) for h in headers)
    return render(
        '<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
        css=css,
        head=head,
        body=body,
    )


def badge(text: str) -> Html:
    return render('<span class="badge badge-{kind}">{text}</span>', kind=text.split()[0], text=text)
