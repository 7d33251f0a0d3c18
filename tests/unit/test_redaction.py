"""redacted_url: the password never shows, the rest stays as written."""

import pytest

from bot.storage.redaction import redacted_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://localhost:6379/0", "redis://localhost:6379/0"),
        ("redis://:s3cret@redis:6379/0", "redis://:***@redis:6379/0"),
        (
            "rediss://user:s3cret@Cache.Example.com:6380/1",
            "rediss://user:***@Cache.Example.com:6380/1",
        ),
        ("redis://user@host/0", "redis://user@host/0"),
        ("redis://u:s3cret@[::1]:6379/0", "redis://u:***@[::1]:6379/0"),
        ("redis://u:s3cret@host:abc/0", "redis://u:***@host:abc/0"),
        ("redis://u:p@ss:w@rd@host:6379", "redis://u:***@host:6379"),
        ("redis://:pa#ss@host", "redis://:***@host"),
        ("redis://:pa?ss@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://u:pa/ss@host/0", "redis://u:***@host/0"),
        ("redis://:a#b?c/d@e@host:6379/2?x=1", "redis://:***@host:6379/2?x=1"),
    ],
)
def test_only_the_password_is_masked(url: str, shown: str) -> None:
    assert redacted_url(url) == shown
