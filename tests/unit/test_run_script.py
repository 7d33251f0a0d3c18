"""``scripts/run``: installs from the lock file, and only when the lock or pyproject changed.

The script runs for real (bash) in a copy of the project's layout whose
``.venv/bin/python`` is a stand-in that records how it was called: pip and
the bot are not run, every other call (the hashing) goes to this Python.
"""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STAND_IN = """#!/usr/bin/env bash
echo "$*" >> "$RUN_CALLS"
case "$1 $2" in
    "-m pip"|"-m bot") exit 0 ;;
esac
exec "$REAL_PYTHON" "$@"
"""


def make_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "run", project / "scripts" / "run")
    shutil.copy2(ROOT / "requirements.lock", project / "requirements.lock")
    shutil.copy2(ROOT / "pyproject.toml", project / "pyproject.toml")
    python = project / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STAND_IN, encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return project


def run(project: Path, tmp_path: Path) -> list[str]:
    """Run ``scripts/run console``; the calls of .venv/bin/python it made."""
    calls = tmp_path / "calls.txt"
    calls.unlink(missing_ok=True)
    env = {**os.environ, "RUN_CALLS": str(calls), "REAL_PYTHON": sys.executable}
    result = subprocess.run(
        ["bash", str(project / "scripts" / "run"), "console"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return calls.read_text(encoding="utf-8").splitlines()


def installs(calls: list[str]) -> list[str]:
    return [call for call in calls if call.startswith("-m pip install")]


def test_the_first_run_installs_from_the_lock_file_then_the_project_without_resolving(tmp_path):
    project = make_project(tmp_path)

    calls = run(project, tmp_path)

    assert [call.split(" -q ")[0] for call in installs(calls)] == ["-m pip install"] * 2
    lock, project_itself = installs(calls)
    assert lock.endswith("-r requirements.lock")
    assert "--no-deps" in project_itself.split()
    assert project_itself.endswith("-e .")
    assert calls[-1] == "-m bot console"


def test_a_second_run_does_not_install_again(tmp_path):
    project = make_project(tmp_path)
    run(project, tmp_path)

    calls = run(project, tmp_path)

    assert installs(calls) == []
    assert calls[-1] == "-m bot console"


def test_a_changed_lock_or_pyproject_installs_again(tmp_path):
    project = make_project(tmp_path)
    run(project, tmp_path)

    with (project / "requirements.lock").open("a", encoding="utf-8") as lock:
        lock.write("# a dependency changed\n")
    assert len(installs(run(project, tmp_path))) == 2
    assert installs(run(project, tmp_path)) == []

    with (project / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write("# a new entry point\n")
    assert len(installs(run(project, tmp_path))) == 2


def test_a_failed_install_is_tried_again_on_the_next_run(tmp_path):
    project = make_project(tmp_path)
    python = project / ".venv" / "bin" / "python"
    working = python.read_text(encoding="utf-8")
    python.write_text(
        working.replace('"-m pip"|"-m bot") exit 0', '"-m pip") exit 1 ;;\n    "-m bot") exit 0'),
        encoding="utf-8",
    )
    env = {**os.environ, "RUN_CALLS": str(tmp_path / "calls.txt"), "REAL_PYTHON": sys.executable}
    failed = subprocess.run(
        ["bash", str(project / "scripts" / "run"), "console"],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert failed.returncode != 0

    python.write_text(working, encoding="utf-8")
    assert len(installs(run(project, tmp_path))) == 2
