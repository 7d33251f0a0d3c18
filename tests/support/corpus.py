"""Test inputs nobody here wrote: ``<repo>/../shared/corpus``, read at test time, never copied.

CI clones the project with a copy of ``shared/`` beside it; elsewhere the folder
may be absent, and the tests that need it skip with a reason.
"""

import json
from pathlib import Path
from typing import Any

CORPUS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
RECORDED_COMPLETIONS = CORPUS_DIR / "openai_chat_completions" / "recorded.json"
TELEGRAM_UPDATES = CORPUS_DIR / "telegram_updates" / "teloxide.json"


def load_corpus(path: Path) -> list[Any]:
    """The JSON list in ``path``, or an empty list when the corpus is not there."""
    if not path.exists():
        return []
    loaded: list[Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded
