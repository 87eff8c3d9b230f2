"""The systems under test and where each one's Python comes from.

chronoq runs from the project's ``.venv``; every peer gets a venv of its own
under ``bench/.venvs/<name>``, built from ``requirements/<name>.txt`` (pinned
versions), and rebuilt when that file changes. Own venvs rather than one
shared: arq pins redis-py below 6, the others take redis-py 8.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE.parent / ".venvs"
REQUIREMENTS = HERE / "requirements"


@dataclass(frozen=True)
class System:
    name: str  # as shown in tables: "chronoq-redis", "rq", ...
    adapter: str  # the module systems/peer_<adapter>.py
    label: str  # as shown in docs: "chronoq (Redis)", "RQ", ...
    store: str = "redis"  # "redis" or "sqlite"
    own_venv: bool = True

    @property
    def is_chronoq(self) -> bool:
        return self.adapter == "chronoq"


SYSTEMS = (
    System("chronoq-redis", "chronoq", "chronoq (Redis)", own_venv=False),
    System("chronoq-sqlite", "chronoq", "chronoq (SQLite)", store="sqlite", own_venv=False),
    System("rq", "rq", "RQ"),
    System("arq", "arq", "arq"),
    System("huey", "huey", "huey"),
    System("dramatiq", "dramatiq", "Dramatiq"),
    System("celery", "celery", "Celery"),
)
BY_NAME = {system.name: system for system in SYSTEMS}


def python_for(system: System, log: Path) -> Path:
    """The interpreter to run ``system`` with, building its venv if needed."""
    if not system.own_venv:
        return Path(sys.executable)
    venv = VENVS / system.adapter
    requirements = REQUIREMENTS / f"{system.adapter}.txt"
    stamp = venv / ".requirements-sha256"
    wanted = hashlib.sha256(requirements.read_bytes()).hexdigest()
    python = venv / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    with log.open("ab") as out:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        subprocess.run([*pip, "-r", str(requirements)], check=True, stdout=out, stderr=out)
    stamp.write_text(wanted)
    return python
