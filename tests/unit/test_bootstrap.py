"""``scripts/bootstrap`` for real: a venv from the bundled pip takes both locks.

This is what a fresh machine does first (``scripts/test`` and ``scripts/run``
call it): ``python3 -m venv`` gives whatever pip the interpreter bundles, and
the install must not depend on that pip or on what was released upstream since
the locks were written. Each test copies the files the bootstrap reads into an
empty directory and runs it with the base interpreter (not this venv's), so the
new ``.venv`` starts from the bundled pip exactly as on a fresh clone.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = (
    "scripts/bootstrap",
    "requirements-bootstrap.lock",
    "requirements.lock",
    "requirements-dev.lock",
    "requirements-build.lock",
    "pyproject.toml",
)
PACKAGES = ("bot", "tools", "prompts", "turn")


def base_python() -> Path:
    """The interpreter this venv was made from (its bundled pip, not this venv's)."""
    for name in (f"python{sys.version_info.major}.{sys.version_info.minor}", "python3"):
        candidate = Path(sys.base_prefix) / "bin" / name
        if candidate.exists():
            return candidate
    raise AssertionError(f"no python3 under {sys.base_prefix}")


def copy_project(into: Path) -> Path:
    for name in COPIED:
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, into / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, into / package, ignore=ignore)
    return into


def test_a_fresh_venv_from_the_bundled_pip_installs_both_locks(tmp_path):
    """The runtime lock first (``scripts/run``), then the dev lock over it (``scripts/test``):
    the second run finds the pinned installer in place and only adds what it lacks."""
    project = copy_project(tmp_path / "clone")
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    env["PYTHON"] = str(base_python())
    python = project / ".venv" / "bin" / "python"

    for lock, probe in (
        ("requirements.lock", "import aiogram, openai, redis, mcp, bot.settings"),
        ("requirements-dev.lock", "import pytest, ruff, mypy, hypothesis"),
    ):
        result = subprocess.run(
            ["bash", str(project / "scripts" / "bootstrap"), lock],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        imported = subprocess.run(
            [str(python), "-c", f"{probe}; print('ok')"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert imported.stdout.strip() == "ok", (lock, imported.stderr)
