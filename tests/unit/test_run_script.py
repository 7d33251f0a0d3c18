"""``scripts/run`` installs via ``scripts/bootstrap``, only when a lock or pyproject changed.

The script runs for real (bash) in a copy of the project's layout whose
``.venv/bin/python`` and ``.venv/bin/uv`` are stand-ins that record how they
were called: nothing is installed and the bot is not run. The real installs
are in ``tests/unit/test_bootstrap.py``.
"""

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = (
    "scripts/run",
    "scripts/bootstrap",
    "requirements-bootstrap.lock",
    "requirements.lock",
    "requirements-build.lock",
    "pyproject.toml",
)

PYTHON_STAND_IN = """#!/usr/bin/env bash
echo "python $*" >> "$RUN_CALLS"
exit 0
"""
UV_STAND_IN = """#!/usr/bin/env bash
echo "uv $*" >> "$RUN_CALLS"
if [ "$1" = "--version" ]; then echo "uv $UV_VERSION"; exit 0; fi
if [ "$1 $2" = "pip install" ] && [ -n "${UV_FAILS:-}" ]; then exit 1; fi
exit 0
"""


def uv_version() -> str:
    for line in (ROOT / "requirements-bootstrap.lock").read_text(encoding="utf-8").splitlines():
        if line.startswith("uv=="):
            return line.removeprefix("uv==").split()[0]
    raise AssertionError("requirements-bootstrap.lock pins no uv")


def make_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    for name in FILES:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, project / name)
    bin_dir = project / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in (("python", PYTHON_STAND_IN), ("uv", UV_STAND_IN)):
        (bin_dir / name).write_text(body, encoding="utf-8")
        (bin_dir / name).chmod((bin_dir / name).stat().st_mode | stat.S_IXUSR)
    return project


def run(project: Path, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``scripts/run console``; the calls it made are in ``calls.txt``."""
    (tmp_path / "calls.txt").unlink(missing_ok=True)
    env = {
        **os.environ,
        "RUN_CALLS": str(tmp_path / "calls.txt"),
        "UV_VERSION": uv_version(),
        **extra,
    }
    return subprocess.run(
        ["bash", str(project / "scripts" / "run"), "console"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def calls_of(project: Path, tmp_path: Path) -> list[str]:
    result = run(project, tmp_path)
    assert result.returncode == 0, result.stderr
    return (tmp_path / "calls.txt").read_text(encoding="utf-8").splitlines()


def installs(calls: list[str]) -> list[str]:
    return [call for call in calls if call.startswith(("uv pip install", "python -m pip"))]


def test_the_first_run_installs_the_lock_with_hashes_then_the_project_without_resolving(tmp_path):
    project = make_project(tmp_path)

    calls = calls_of(project, tmp_path)

    lock, project_itself = installs(calls)
    assert lock.startswith("uv pip install")
    assert "--require-hashes" in lock.split()
    assert "-r requirements.lock" in lock
    assert "--no-deps" in project_itself.split()
    assert project_itself.endswith("-e .")
    assert calls[-1] == "python -m bot console"


def test_the_installer_comes_from_the_bootstrap_lock_when_absent_or_another_version(tmp_path):
    project = make_project(tmp_path)
    (project / ".venv" / "bin" / "uv").write_text(
        UV_STAND_IN.replace("$UV_VERSION", "0.0.1"), encoding="utf-8"
    )

    calls = calls_of(project, tmp_path)

    pip = [call for call in calls if call.startswith("python -m pip install")]
    assert len(pip) == 1
    assert "--require-hashes" in pip[0].split()
    assert pip[0].endswith("-r requirements-bootstrap.lock")


def test_a_second_run_does_not_install_again(tmp_path):
    project = make_project(tmp_path)
    calls_of(project, tmp_path)

    calls = calls_of(project, tmp_path)

    assert installs(calls) == []
    assert calls[-1] == "python -m bot console"


def test_a_changed_lock_or_pyproject_installs_again(tmp_path):
    project = make_project(tmp_path)
    calls_of(project, tmp_path)

    with (project / "requirements.lock").open("a", encoding="utf-8") as lock:
        lock.write("# a dependency changed\n")
    assert len(installs(calls_of(project, tmp_path))) == 2
    assert installs(calls_of(project, tmp_path)) == []

    with (project / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write("# a new entry point\n")
    assert len(installs(calls_of(project, tmp_path))) == 2


def test_a_failed_install_is_tried_again_on_the_next_run(tmp_path):
    project = make_project(tmp_path)

    failed = run(project, tmp_path, UV_FAILS="1")
    assert failed.returncode != 0
    assert "python -m bot console" not in (tmp_path / "calls.txt").read_text(encoding="utf-8")

    assert len(installs(calls_of(project, tmp_path))) == 2
