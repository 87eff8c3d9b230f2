"""The systems under test and what runs each one's driver and worker.

chronoq runs from the project's ``.venv``; every Python peer gets a venv of
its own under ``bench/.venvs/<name>``, built from ``requirements/<name>.txt``
(pinned versions), and rebuilt when that file changes. Own venvs rather than
one shared: arq pins redis-py below 6, SAQ below 8, the others take redis-py 8.

BullMQ runs in Node: its driver and worker are ``node/driver.js`` and
``node/peer_bullmq.js``, and its packages (``node/package-lock.json``) are
installed with ``npm ci`` under ``bench/.venvs/bullmq`` on first use, and
again when the lock file changes. There ``bin/node`` is a launcher that runs
the machine's ``node`` with ``NODE_PATH`` on those packages, so the rest of
the harness treats it as it treats a venv's ``bin/python``.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE.parent / ".venvs"
REQUIREMENTS = HERE / "requirements"
NODE = HERE / "node"
NODE_PACKAGES = ("package.json", "package-lock.json")


@dataclass(frozen=True)
class System:
    name: str  # as shown in tables: "chronoq-redis", "rq", ...
    adapter: str  # the module systems/peer_<adapter>.py (node/peer_<adapter>.js)
    label: str  # as shown in docs: "chronoq (Redis)", "RQ", ...
    store: str = "redis"  # "redis" or "sqlite"
    own_venv: bool = True
    runtime: str = "python"  # "python" or "node": what runs its driver and worker

    @property
    def is_chronoq(self) -> bool:
        return self.adapter == "chronoq"

    @property
    def driver(self) -> Path:
        """The producer side, run by the system's interpreter: the same verbs
        and answers in both runtimes (see driver.py)."""
        return NODE / "driver.js" if self.runtime == "node" else HERE / "driver.py"


SYSTEMS = (
    System("chronoq-redis", "chronoq", "chronoq (Redis)", own_venv=False),
    System("chronoq-sqlite", "chronoq", "chronoq (SQLite)", store="sqlite", own_venv=False),
    System("rq", "rq", "RQ"),
    System("arq", "arq", "arq"),
    System("huey", "huey", "huey"),
    System("dramatiq", "dramatiq", "Dramatiq"),
    System("celery", "celery", "Celery"),
    System("saq", "saq", "SAQ"),
    System("bullmq", "bullmq", "BullMQ", runtime="node"),
)
BY_NAME = {system.name: system for system in SYSTEMS}


def interpreter_for(system: System, log: Path) -> Path:
    """The interpreter to run ``system``'s driver and worker with, building
    its venv (or its Node packages) if needed."""
    if not system.own_venv:
        return Path(sys.executable)
    if system.runtime == "node":
        return _node_packages(system, log)
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


def _node_packages(system: System, log: Path) -> Path:
    """``bench/.venvs/<name>``: the pinned packages of ``node/package-lock.json``
    (``npm ci``) and ``bin/node``, the launcher that finds them."""
    home = VENVS / system.adapter
    launcher = home / "bin" / "node"
    stamp = home / ".packages-sha256"
    wanted = hashlib.sha256(b"".join((NODE / f).read_bytes() for f in NODE_PACKAGES)).hexdigest()
    if launcher.exists() and stamp.exists() and stamp.read_text() == wanted:
        return launcher
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise RuntimeError(f"{system.name} needs node and npm on the PATH")
    shutil.rmtree(home, ignore_errors=True)
    launcher.parent.mkdir(parents=True)
    for name in NODE_PACKAGES:
        shutil.copyfile(NODE / name, home / name)
    with log.open("ab") as out:
        npm_ci = [npm, "ci", "--no-audit", "--no-fund", "--omit=dev"]
        subprocess.run(npm_ci, cwd=home, check=True, stdout=out, stderr=out)
    modules = shlex.quote(str(home / "node_modules"))
    launcher.write_text(
        f'#!/bin/sh\nNODE_PATH={modules}\nexport NODE_PATH\nexec {shlex.quote(node)} "$@"\n'
    )
    launcher.chmod(0o755)
    stamp.write_text(wanted)
    return launcher
