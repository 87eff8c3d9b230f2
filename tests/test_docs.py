"""Every Python example in README.md and docs/ runs, as written, in a fresh
directory; every link of the repository's Markdown stays inside it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)

EXAMPLES = [
    pytest.param(code, id=f"{path.name}-{n}")
    for path in DOCS
    for n, code in enumerate(BLOCK.findall(path.read_text()), start=1)
]


def test_docs_have_examples() -> None:
    assert EXAMPLES, "README.md and docs/ should show runnable Python examples"


# the first Spark example starts the JVM and a local[2] session: on a busy
# 2-core machine that alone took over the suite's default 60 s once
@pytest.mark.timeout(240)
@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHRONOQ_STORE", raising=False)
    if code.startswith(ALONE):
        _run_alone(code)
        return
    exec(compile(code, "<docs example>", "exec"), {"__name__": "__docs__"})


#: an example that changes what a process sets once (a tracer provider) runs
#: in a process of its own, so that no other test runs with it
ALONE = "# run alone"


def _run_alone(code: str) -> None:
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=200)
    assert run.returncode == 0, run.stderr


# -- links ---------------------------------------------------------------------------

#: the Markdown a reader of the repository meets (examples' READMEs too)
MARKDOWN = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").glob("**/*.md")),
]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
AUTOLINK = re.compile(r"<([a-z][a-z0-9+.-]*:[^\s>]+)>", re.I)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text without code blocks and code spans, whose brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _targets(path: Path) -> list[str]:
    prose = _prose(path.read_text())
    return [
        *LINK.findall(prose),
        *REFERENCE.findall(prose),
        *AUTOLINK.findall(prose),
    ]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text as shown, lower case, with
    punctuation dropped and each space a hyphen."""
    shown = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", shown.lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _broken(path: Path, target: str) -> str | None:
    """Why the link ``target`` of ``path`` does not resolve inside the repository."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return None  # a web address: not a file of the repository
    if not parts.path:  # an anchor of the same page
        resolved = path
    elif parts.path.startswith("/"):
        return "an absolute path: link relative to the page, inside the repository"
    else:
        resolved = (path.parent / unquote(parts.path)).resolve()
        if not resolved.is_relative_to(ROOT):
            return "outside the repository: a clone has no such file"
        if not resolved.exists():
            return "no such file in the repository"
    fragment = unquote(parts.fragment)
    if fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved):
        return f"{resolved.relative_to(ROOT)} has no heading #{parts.fragment}"
    return None


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repository(path: Path) -> None:
    broken = [
        f"{target}: {why}"
        for target in _targets(path)
        if (why := _broken(path, target)) is not None
    ]
    assert not broken, f"{path.relative_to(ROOT)} has links that do not resolve: {broken}"


def test_the_readme_links_only_inside_the_repository() -> None:
    outside = [target for target in _targets(ROOT / "README.md") if urlsplit(target).scheme]
    assert not outside, f"README.md links outside the repository: {outside}"


def test_the_link_check_catches_what_it_should(tmp_path: Path) -> None:
    page = ROOT / "docs" / "operations.md"
    assert _broken(page, "../../outside-the-repository.md") is not None
    assert _broken(page, "/etc/hostname") is not None
    assert _broken(page, "no-such-page.md") is not None
    assert _broken(page, "#no-such-heading") is not None
    assert _broken(page, "../README.md") is None
    assert _broken(page, "#durability") is None
    assert _broken(page, "https://example.com/") is None
    assert _slug("`chronoq export`: the event log to Parquet") == (
        "chronoq-export-the-event-log-to-parquet"
    )
    sample = tmp_path / "sample.md"
    sample.write_text("`[a](b)` [c](d.md#e)\n```text\n[f](g)\n```\n[h]: i.md\n")
    assert _targets(sample) == ["d.md#e", "i.md"]


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_merge_conflict_is_left_in_the_docs(path: Path) -> None:
    markers = re.compile(r"^(<{7}|={7}|>{7})( |$)", re.M)
    assert not markers.search(path.read_text()), f"{path.relative_to(ROOT)} holds conflict markers"
