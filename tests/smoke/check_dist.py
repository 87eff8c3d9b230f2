"""What `make dist` built, checked before anyone installs it: the wheel holds
every file of the packages pyproject names (the .lua library, schema.sql,
py.typed, the dashboard's static files and templates, pyspark_chronoq) and nothing else; the
sdist holds the sources, tests and docs a packager builds and tests from, and
none of a checkout's leftovers (virtualenvs, caches, node_modules, databases).
The wheel itself was built from the sdist (`python -m build`), which shows the
sdist has what a build needs.

Run from the checkout: ``python tests/smoke/check_dist.py [dist]``. Not a
pytest module: it reads what `make dist` just wrote."""

from __future__ import annotations

import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path, PurePosixPath
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]

#: files a user's install cannot work without; listed by name, so that a file
#: missing from the checkout too cannot pass unseen
MUST_HAVE = (
    "chronoq/py.typed",
    "chronoq/backends/redis/lua/put.lua",
    "chronoq/backends/redis/lua/lib/1_keys.lua",
    "chronoq/backends/sqlite/schema.sql",
    "chronoq/server/ui/static/htmx.min.js",
    "chronoq/server/ui/static/dashboard.css",
    "chronoq/server/ui/static/dashboard.js",
    "chronoq/server/ui/templates/base.html",
    "chronoq/server/ui/templates/charts.svg",
    "chronoq/server/ui/templates/dead.html",
    "chronoq/server/ui/templates/delayed.html",
    "chronoq/server/ui/templates/flash.html",
    "chronoq/server/ui/templates/job.html",
    "chronoq/server/ui/templates/lag.html",
    "chronoq/server/ui/templates/macros.html",
    "chronoq/server/ui/templates/page.html",
    "chronoq/server/ui/templates/summary.html",
    "chronoq/server/ui/templates/topic.html",
    "chronoq/server/ui/templates/topics.html",
    "pyspark_chronoq/__init__.py",
)

#: path parts that are never sources: a checkout's virtualenvs, caches and outputs
LEFTOVERS = {
    ".git",
    ".venv",
    ".venvs",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
}
TOP_LEFTOVERS = {"dist", "build"}  # the build's own outputs, at the top of a checkout
LEFTOVER_SUFFIXES = (".pyc", ".pyo", ".db", ".db-wal", ".db-shm", ".whl", ".tar.gz")
SDIST_MUST_HAVE = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "PKG-INFO")


class PackageFile(NamedTuple):
    source: str  # its path in the checkout and in the sdist (under its top folder)
    data: bytes


def package_files(packages: list[str]) -> dict[str, PackageFile]:
    """Each file of the packages in the checkout (``src/chronoq`` ...), by its
    path in the wheel; compiled files left out."""
    found: dict[str, PackageFile] = {}
    for package in packages:
        base = ROOT / package
        for path in sorted(base.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                in_wheel = f"{base.name}/{path.relative_to(base).as_posix()}"
                source = path.relative_to(ROOT).as_posix()
                found[in_wheel] = PackageFile(source, path.read_bytes())
    return found


def check_wheel(wheel: Path, expected: dict[str, PackageFile], dist_info: str) -> list[str]:
    problems: list[str] = []
    with zipfile.ZipFile(wheel) as archive:
        names = {name for name in archive.namelist() if not name.endswith("/")}
        problems += [f"{wheel.name} lacks {name}" for name in MUST_HAVE if name not in names]
        for name, file in expected.items():
            if name not in names:
                problems.append(f"{wheel.name} lacks {name} (it is in the checkout)")
            elif archive.read(name) != file.data:
                problems.append(f"{wheel.name}: {name} differs from the checkout's")
        extra = sorted(n for n in names - expected.keys() if not n.startswith(dist_info + "/"))
        problems += [f"{wheel.name} holds {name}, not a file of the packages" for name in extra]
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        for extra_name in ("server", "redis"):
            if f"Provides-Extra: {extra_name}" not in metadata:
                problems.append(f"{wheel.name}: METADATA lacks the {extra_name} extra")
        if (
            "chronoq = chronoq.cli.main:main"
            not in archive.read(f"{dist_info}/entry_points.txt").decode()
        ):
            problems.append(f"{wheel.name}: no chronoq console script")
    return problems


def leftover(path: PurePosixPath) -> bool:
    """``path`` (under the sdist's top folder) is not a source."""
    inside = path.parts[1:]
    return (
        bool(LEFTOVERS & set(inside))
        or (len(inside) > 1 and inside[0] in TOP_LEFTOVERS)
        or path.name.endswith(LEFTOVER_SUFFIXES)
    )


def check_sdist(sdist: Path, top: str, expected: dict[str, PackageFile]) -> list[str]:
    with tarfile.open(sdist) as archive:
        names = {PurePosixPath(member.name) for member in archive.getmembers() if member.isfile()}
    inside = {name.relative_to(top).as_posix() for name in names if name.parts[0] == top}
    problems = [f"{sdist.name}: {name} is outside {top}/" for name in names if name.parts[0] != top]
    problems += [f"{sdist.name} lacks {name}" for name in SDIST_MUST_HAVE if name not in inside]
    missing = sorted(file.source for file in expected.values() if file.source not in inside)
    problems += [f"{sdist.name} lacks {name} (it is in the checkout)" for name in missing]
    junk = sorted(name for name in names if leftover(name))
    problems += [f"{sdist.name} holds {name}, a leftover" for name in junk]
    return problems


def main(argv: list[str]) -> int:
    dist = Path(argv[1]) if len(argv) > 1 else ROOT / "dist"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    version = project["project"]["version"]
    packages = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    wheel = dist / f"chronoq-{version}-py3-none-any.whl"
    sdist = dist / f"chronoq-{version}.tar.gz"
    absent = [path for path in (wheel, sdist) if not path.is_file()]
    if absent:
        print(f"check_dist: {', '.join(map(str, absent))} not found: run `make dist` first")
        return 1
    expected = package_files(packages)
    problems = check_wheel(wheel, expected, f"chronoq-{version}.dist-info")
    problems += check_sdist(sdist, f"chronoq-{version}", expected)
    for problem in problems:
        print(f"check_dist: {problem}")
    if problems:
        return 1
    print(
        f"check_dist: {wheel.name} ({wheel.stat().st_size // 1024} KiB, {len(expected)} files of "
        f"{', '.join(packages)}) and {sdist.name} ({sdist.stat().st_size // 1024} KiB) are complete"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
