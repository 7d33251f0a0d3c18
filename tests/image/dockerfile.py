"""The image's file set, reproduced from the ``Dockerfile`` on this machine (no Docker here).

:func:`reproduce_image` reads the ``Dockerfile`` line by line and does what each
line does, each stage in its own empty directory standing for the stage's root:
``COPY`` copies from the build context (the project filtered by ``.dockerignore``)
or from an earlier stage; ``RUN pip wheel`` and ``RUN pip install`` of the
project's wheel run pip for real; ``RUN pip install -r <lock>`` is stood in for
by this venv's site-packages, after checking that it holds exactly the lock's
versions. A ``RUN`` line this module does not know fails the test: teach it here
rather than let the image and its test drift apart.
"""

import fnmatch
import glob
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
# Where pip installs into a python image (the base image's site-packages).
_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
IMAGE_SITE_PACKAGES = f"usr/local/lib/python{_VERSION}/site-packages"
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)")
# RUN commands that set up the image's user: nothing to reproduce for a file set.
_USER_COMMANDS = ("groupadd", "useradd")


@dataclass
class Stage:
    """One ``FROM`` stage: its stand-in root directory, working directory and environment."""

    name: str
    root: Path
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    # Lock files whose packages this stage installed (stood in for by the venv).
    locked: list[str] = field(default_factory=list)

    def path(self, image_path: str) -> Path:
        """Where an image path of this stage lies on this machine."""
        absolute = image_path if image_path.startswith("/") else f"{self.workdir}/{image_path}"
        return self.root / os.path.normpath(absolute).lstrip("/")


@dataclass
class Image:
    """The last stage, as the container would run it."""

    stage: Stage
    entrypoint: list[str]
    cmd: list[str]
    # What docker build was given: the project minus .dockerignore.
    context: Path

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        """The container's environment on this machine.

        ``PYTHONPATH`` holds the image's own site-packages (and any path the
        ``Dockerfile`` puts there), then this venv's site-packages for the locked
        dependencies; run with ``python -S`` so that no ``.pth`` file (the
        editable install's) adds anything else.
        """
        env = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL") if name in os.environ}
        env.update(self.stage.env)
        paths = [str(self.stage.path(p)) for p in env.get("PYTHONPATH", "").split(":") if p]
        paths.append(str(self.stage.path(f"/{IMAGE_SITE_PACKAGES}")))
        paths.append(sysconfig.get_paths()["purelib"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["HOME"] = str(self.stage.path("/home/bot"))
        env.update(extra)
        return env

    def python(self, *args: str) -> list[str]:
        """The argv of ``python ...`` in the container, as this machine runs it."""
        return [sys.executable, "-S", *args]

    @property
    def site_packages(self) -> Path:
        """Where the image's ``pip install`` put the project."""
        return self.stage.path(f"/{IMAGE_SITE_PACKAGES}")

    @property
    def cwd(self) -> Path:
        """The container's working directory."""
        return self.stage.path(self.stage.workdir)


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in dockerfile.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = pending + line
        pending = ""
        keyword, _, rest = whole.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def dockerignore(project: Path) -> list[str]:
    """The patterns of ``.dockerignore``, in order."""
    path = project / ".dockerignore"
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _ignored(relative: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.removeprefix("!").strip("/")
        # "**/name" matches at any depth, the top level included.
        shapes = [body, body[3:]] if body.startswith("**/") else [body]
        if any(fnmatch.fnmatchcase(p, shape) for p in prefixes for shape in shapes):
            ignored = not negate
    return ignored


def build_context(project: Path, into: Path) -> Path:
    """A copy of what ``docker build .`` sends: the project minus ``.dockerignore``."""
    patterns = dockerignore(project)
    for directory, subdirs, files in os.walk(project):
        here = Path(directory)
        relative_dir = here.relative_to(project).as_posix()
        kept = []
        for sub in subdirs:
            relative = sub if relative_dir == "." else f"{relative_dir}/{sub}"
            reincluded = any(p.startswith("!") and p[1:].startswith(relative) for p in patterns)
            if not _ignored(relative, patterns) or reincluded:
                kept.append(sub)
        subdirs[:] = kept
        for name in files:
            relative = name if relative_dir == "." else f"{relative_dir}/{name}"
            if not _ignored(relative, patterns):
                target = into / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(here / name, target)
    return into


def _copy(source: Path, destination: Path, destination_is_dir: bool) -> None:
    """``COPY``'s rule: a directory's contents go into the destination."""
    if source.is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True)
        return
    if destination_is_dir or destination.is_dir():
        destination.mkdir(parents=True, exist_ok=True)
        destination = destination / source.name
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, destination)


def check_locked(lock: Path) -> None:
    """This venv holds exactly the lock's versions: it may stand in for ``pip install -r``."""
    wrong = []
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line)
        if match is None:
            continue
        name, version = match.groups()
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = "absent"
        if installed != version:
            wrong.append(f"{name}=={version} (venv: {installed})")
    if wrong:
        raise AssertionError(f"this venv does not match {lock.name}: {', '.join(wrong)}")


def _run_pip(stage: Stage, args: list[str]) -> None:
    """One ``pip ...`` command of a ``RUN`` line, on this machine."""
    command, *options = args
    if command == "install" and "-r" in options:
        for index, option in enumerate(options):
            if option == "-r":
                lock = stage.path(options[index + 1])
                check_locked(lock)
                stage.locked.append(lock.name)
        return
    mapped: list[str] = []
    for option in options:
        name, equals, value = option.partition("=")
        if equals and value.startswith("/"):
            mapped.append(f"{name}={stage.path(value)}")
        elif option.startswith("-"):
            mapped.append(option)
        elif "*" in option:
            matches = sorted(glob.glob(str(stage.path(option))))
            if not matches:
                raise AssertionError(f"RUN pip {command}: nothing matches {option}")
            mapped.extend(matches)
        else:
            mapped.append(str(stage.path(option)))
    if command == "install":
        # Into the stage's site-packages, not into this venv.
        mapped = ["--target", str(stage.path(f"/{IMAGE_SITE_PACKAGES}")), *mapped]
    elif command != "wheel":
        raise AssertionError(f"RUN pip {command}: not reproduced by tests/image/dockerfile.py")
    env = dict(os.environ)
    env.update(stage.env)
    env.pop("PYTHONPATH", None)
    subprocess.run(
        [sys.executable, "-m", "pip", command, "--quiet", *mapped],
        check=True,
        cwd=stage.path(stage.workdir),
        env=env,
    )


def _run_uv_pip(stage: Stage, args: list[str]) -> None:
    """``uv pip install --system ... -r <lock>``: stood in for by this venv, like pip's."""
    command, *options = args
    if command != "install" or "-r" not in options or "--require-hashes" not in options:
        raise AssertionError(f"RUN uv pip {' '.join(args)}: not reproduced by {__name__}")
    _run_pip(stage, ["install", *options])


def _run(stage: Stage, line: str) -> None:
    """A ``RUN`` line (shell form, commands joined by ``&&``)."""
    for part in line.split("&&"):
        words = shlex.split(part)
        if not words:
            continue
        if words[:2] == ["uv", "pip"]:
            _run_uv_pip(stage, words[2:])
        elif words[0] == "pip" or words[:3] == ["python", "-m", "pip"]:
            _run_pip(stage, words[1:] if words[0] == "pip" else words[3:])
        elif words[0] in _USER_COMMANDS:
            continue
        elif words[:2] == ["rm", "-rf"]:
            for path in words[2:]:
                shutil.rmtree(stage.path(path), ignore_errors=True)
        else:
            raise AssertionError(f"RUN {part.strip()!r}: not reproduced by {__name__}")


def _copy_instruction(stage: Stage, rest: str, context: Path, stages: dict[str, Stage]) -> None:
    """``COPY [--from=stage] source... destination``."""
    words = shlex.split(rest)
    origin = context
    options = [w for w in words if w.startswith("--")]
    if options:
        assert all(w.startswith("--from=") for w in options), rest
        origin = stages[options[0].removeprefix("--from=")].root
    *sources, destination = [w for w in words if not w.startswith("--")]
    target = stage.path(destination)
    for source in sources:
        path = origin / source.lstrip("/")
        assert path.exists(), f"COPY {source}: not in the build context"
        _copy(path, target, destination.endswith("/") or len(sources) > 1)


def reproduce_image(project: Path, workspace: Path) -> Image:
    """Follow the ``Dockerfile`` of ``project`` in the empty directory ``workspace``."""
    context = build_context(project, workspace / "context")
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    entrypoint: list[str] = []
    cmd: list[str] = []
    for keyword, rest in instructions(project / "Dockerfile"):
        if keyword == "FROM":
            words = rest.split()
            python = f"python:{_VERSION}."
            assert words[0].startswith(python), f"{words[0]} is not this machine's Python"
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            stage = Stage(name=name, root=workspace / f"stage-{len(stages)}")
            stage.root.mkdir()
            stages[name] = stage
            continue
        assert stage is not None, f"{keyword} before FROM"
        if keyword == "WORKDIR":
            stage.workdir = rest if rest.startswith("/") else f"{stage.workdir}/{rest}"
            stage.path(stage.workdir).mkdir(parents=True, exist_ok=True)
        elif keyword == "ENV":
            for assignment in shlex.split(rest):
                name, _, value = assignment.partition("=")
                stage.env[name] = value
        elif keyword == "COPY":
            _copy_instruction(stage, rest, context, stages)
        elif keyword == "RUN":
            _run(stage, rest)
        elif keyword == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif keyword == "CMD":
            cmd = json.loads(rest)
        elif keyword in {"USER", "EXPOSE", "HEALTHCHECK", "LABEL", "ARG"}:
            continue
        else:
            raise AssertionError(f"{keyword}: not reproduced by tests/image/dockerfile.py")
    assert stage is not None, "no FROM in the Dockerfile"
    return Image(stage=stage, entrypoint=entrypoint, cmd=cmd, context=context)
