"""Test inputs nobody here wrote: ``<repo>/../shared/corpus``, read at test time, never copied.

CI clones the project with a copy of ``shared/`` beside it; elsewhere the folder
may be absent, and the tests that need it skip with :func:`absent`'s reason: the
path looked for and how to get it.
"""

import json
from pathlib import Path
from typing import Any

import pytest

CORPUS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
RECORDED_COMPLETIONS = CORPUS_DIR / "openai_chat_completions" / "recorded.json"
TELEGRAM_UPDATES = CORPUS_DIR / "telegram_updates" / "teloxide.json"


def absent(path: Path) -> str:
    """Why a test of ``path`` skips: where it looked, and how to get the corpus there."""
    return (
        f"{path} is absent: the test corpus is read from ../shared/corpus beside the "
        "repository (CI lays a copy of the team's shared/ folder there); copy that folder "
        "beside your clone to run this test"
    )


def requires(path: Path) -> pytest.MarkDecorator:
    """Skip the test, with :func:`absent`'s reason, when ``path`` is not there."""
    return pytest.mark.skipif(not path.exists(), reason=absent(path))


def load_corpus(path: Path) -> list[Any]:
    """The JSON list in ``path``, or an empty list when the corpus is not there."""
    if not path.exists():
        return []
    loaded: list[Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded
