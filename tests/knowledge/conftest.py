"""Help-center fixtures: a private copy of the demo articles that a test may change."""

import shutil
from pathlib import Path

import pytest

from bot.settings import DEMO_HELP_CENTER


@pytest.fixture
def articles_dir(tmp_path: Path) -> Path:
    """A copy of the demo help center in the test's temporary directory."""
    target = tmp_path / "help"
    shutil.copytree(DEMO_HELP_CENTER, target)
    return target


def write_article(directory: Path, name: str, text: str) -> Path:
    """Write one article file (UTF-8) and return its path."""
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path
