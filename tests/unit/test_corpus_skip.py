"""A test of ``../shared/corpus`` skips, where the corpus is absent, saying where it looked."""

from pathlib import Path

from tests.support.corpus import CORPUS_DIR, TELEGRAM_UPDATES, requires


def test_the_skip_for_an_absent_corpus_names_the_path_and_how_to_get_it(tmp_path: Path) -> None:
    missing = tmp_path / "shared" / "corpus" / "telegram_updates" / "teloxide.json"
    mark = requires(missing)

    assert mark.args == (True,)
    reason = mark.kwargs["reason"]
    assert str(missing) in reason
    assert "../shared/corpus beside the repository" in reason
    assert "copy that folder beside your clone" in reason


def test_the_corpus_is_looked_for_beside_the_repository() -> None:
    repository = Path(__file__).resolve().parents[2]
    assert repository.parent / "shared" / "corpus" == CORPUS_DIR
    assert TELEGRAM_UPDATES.is_relative_to(CORPUS_DIR)
