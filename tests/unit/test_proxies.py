"""Which proxy a client uses: its setting, else the standard variables, NO_PROXY honoured."""

import pytest

from bot.proxies import ProxyURLError, normalise_proxy_url, proxy_for
from bot.settings import SettingsError
from bot.testing.settings import make_settings

TELEGRAM = "https://api.telegram.org"


def test_the_configured_proxy_wins_over_the_environment() -> None:
    environ = {"HTTPS_PROXY": "http://env:3128"}
    assert proxy_for(TELEGRAM, "socks5://u:p@own:1080", environ) == "socks5://u:p@own:1080"


def test_the_variable_of_the_target_scheme_then_all_proxy() -> None:
    environ = {"HTTPS_PROXY": "http://secure:3128", "HTTP_PROXY": "http://plain:3128"}
    assert proxy_for(TELEGRAM, None, environ) == "http://secure:3128"
    assert proxy_for("http://model.local:8000/v1", None, environ) == "http://plain:3128"
    assert proxy_for(TELEGRAM, None, {"ALL_PROXY": "socks5h://s:1080"}) == "socks5://s:1080"
    assert proxy_for(TELEGRAM, None, {}) is None


def test_lower_case_wins_and_a_bare_host_is_an_http_proxy() -> None:
    environ = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "lower:3128"}
    assert proxy_for(TELEGRAM, None, environ) == "http://lower:3128"


@pytest.mark.parametrize(
    ("no_proxy", "bypassed"),
    [
        ("*", True),
        ("api.telegram.org", True),
        (".telegram.org", True),
        ("localhost, telegram.org:443", True),
        ("example.org,gram.org", False),
        ("", False),
    ],
)
def test_no_proxy_exempts_hosts_and_domains(no_proxy: str, bypassed: bool) -> None:
    environ = {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": no_proxy}
    assert (proxy_for(TELEGRAM, None, environ) is None) is bypassed


@pytest.mark.parametrize("url", ["ftp://h:21", "http://h", "socks5://:1080", "http://h:port"])
def test_unusable_proxy_urls_are_refused(url: str) -> None:
    with pytest.raises(ProxyURLError):
        normalise_proxy_url(url)


def test_a_bad_proxy_setting_is_reported_without_its_value() -> None:
    with pytest.raises(SettingsError) as raised:
        make_settings(LLM_PROXY="ftp://user:hunter2@proxy:21")
    assert any(problem.startswith("LLM_PROXY") for problem in raised.value.problems), raised.value
    assert "hunter2" not in str(raised.value)
