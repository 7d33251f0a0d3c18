"""Settings: every variable documented, every problem reported at once, secrets hidden."""

import re
from pathlib import Path

import pytest
from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

from bot.settings import (
    SETTINGS_SECTIONS,
    LLMSettings,
    McpSettings,
    Settings,
    SettingsError,
    describe_source_error,
    header_value_problem,
    mcp_header_problems,
    offline_by_default,
)

ROOT = Path(__file__).resolve().parents[2]


def variable_names() -> set[str]:
    names: set[str] = set()
    for section in SETTINGS_SECTIONS.values():
        for field in section.model_fields.values():
            alias = field.validation_alias
            assert isinstance(alias, AliasChoices)
            names.update(str(choice) for choice in alias.choices)
    return names


def test_env_example_documents_every_setting_with_a_comment():
    lines = (ROOT / ".env.example").read_text(encoding="utf-8").splitlines()
    documented: dict[str, int] = {}
    for index, line in enumerate(lines):
        if match := re.match(r"^([A-Z_]+)=", line):
            documented[match.group(1)] = index
    assert set(documented) == variable_names()
    for name, index in documented.items():
        above = lines[index - 1]
        assert above.startswith("#") or re.match(r"^[A-Z_]+=", above), name


def test_every_problem_is_reported_at_once(monkeypatch):
    monkeypatch.setenv("LLM_BACKEND", "openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("TOOL_MAX_STEPS", "9")
    monkeypatch.setenv("SUPPORT_TIMEZONE", "Mars/Olympus")
    monkeypatch.chdir(ROOT / "tests")  # no .env here
    with pytest.raises(SettingsError) as raised:
        Settings.from_env()
    problems = raised.value.problems
    assert any("OPENAI_API_KEY is not set" in p for p in problems)
    assert any(p.startswith("TOOL_MAX_STEPS:") for p in problems)
    assert any(p.startswith("SUPPORT_TIMEZONE:") for p in problems)


def test_an_empty_value_means_not_set(monkeypatch):
    monkeypatch.setenv("LLM_BACKEND", "offline")
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    assert LLMSettings(_env_file=None).base_url is None


def test_secrets_never_show_in_reprs_or_problems(monkeypatch):
    monkeypatch.setenv("LLM_BACKEND", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value")
    monkeypatch.setenv("LLM_TIMEOUT_SECONDS", "-1")
    with pytest.raises(SettingsError) as raised:
        Settings.from_env()
    assert "sk-very-secret-value" not in str(raised.value)
    monkeypatch.setenv("LLM_TIMEOUT_SECONDS", "5")
    settings = LLMSettings(_env_file=None)
    assert "sk-very-secret-value" not in repr(settings)
    assert "sk-very-secret-value" not in str(settings.model_dump())


# Names an orchestrator or a shell sets for its own reasons; none of them is ours.
_USUAL_SUSPECTS = ("PATH", "HOME", "URL", "HOST", "PORT", "MODEL", "SECRET", "LEVEL", "STREAM")


def _poison_for(name: str) -> str:
    # Values that would validate for most fields, so a leak shows as a changed setting
    # rather than as a validation error.
    return {"PATH": "/usr/bin:/bin"}.get(name, "7")


def test_settings_read_only_their_documented_variables(monkeypatch):
    documented = variable_names()
    baseline = Settings.from_env({"LLM_BACKEND": "offline"}, env_file=None)
    bare = {name.upper() for section in SETTINGS_SECTIONS.values() for name in section.model_fields}
    poisoned = (bare | set(_USUAL_SUSPECTS)) - documented
    assert {"PATH", "URL", "MODEL", "PORT", "HOST", "SECRET", "LEVEL", "STREAM"} <= poisoned
    for name in poisoned:
        monkeypatch.setenv(name, _poison_for(name))
        monkeypatch.setenv(name.lower(), _poison_for(name))
    loaded = Settings.from_env({"LLM_BACKEND": "offline"}, env_file=None)
    assert loaded == baseline
    assert loaded.webhook.path == "/telegram/webhook"


def test_llm_max_connections_is_read_and_must_be_positive(monkeypatch):
    monkeypatch.setenv("LLM_BACKEND", "offline")
    assert LLMSettings(_env_file=None).max_connections == 1000
    monkeypatch.setenv("LLM_MAX_CONNECTIONS", "250")
    assert LLMSettings(_env_file=None).max_connections == 250
    monkeypatch.setenv("LLM_MAX_CONNECTIONS", "0")
    with pytest.raises(ValueError, match=r"LLM_MAX_CONNECTIONS|max_connections"):
        LLMSettings(_env_file=None)


def test_sentinel_mode_needs_sentinels_given_as_host_port():
    base = {"LLM_BACKEND": "offline"}
    with pytest.raises(SettingsError, match="REDIS_MODE=sentinel needs REDIS_SENTINELS"):
        Settings.from_env({**base, "REDIS_MODE": "sentinel"}, env_file=None)
    with pytest.raises(SettingsError, match="'nohost' is not host:port"):
        Settings.from_env(
            {**base, "REDIS_MODE": "sentinel", "REDIS_SENTINELS": "a:26379,nohost"},
            env_file=None,
        )
    settings = Settings.from_env(
        {**base, "REDIS_MODE": "sentinel", "REDIS_SENTINELS": "a:26379, [::1]:26380"},
        env_file=None,
    )
    assert settings.redis.sentinel_addresses() == [("a", 26379), ("::1", 26380)]


def test_an_unknown_redis_mode_is_refused():
    with pytest.raises(SettingsError, match="REDIS_MODE"):
        Settings.from_env({"LLM_BACKEND": "offline", "REDIS_MODE": "replica"}, env_file=None)


def test_handoff_is_off_without_a_staff_chat_and_needs_a_supergroup_id(monkeypatch):
    monkeypatch.delenv("STAFF_CHAT_ID", raising=False)
    base = {"LLM_BACKEND": "offline"}
    assert Settings.from_env(base, env_file=None).handoff.staff_chat_id is None
    on = Settings.from_env({**base, "STAFF_CHAT_ID": "-1001234567890"}, env_file=None).handoff
    assert (on.staff_chat_id, on.after_failed_turns, on.idle_minutes) == (-1001234567890, 3, 60)
    with pytest.raises(SettingsError, match="STAFF_CHAT_ID must be a supergroup id"):
        Settings.from_env({**base, "STAFF_CHAT_ID": "12345"}, env_file=None)
    with pytest.raises(SettingsError, match="HANDOFF_AFTER_FAILED_TURNS"):
        Settings.from_env({**base, "HANDOFF_AFTER_FAILED_TURNS": "0"}, env_file=None)


def float_variables() -> list[str]:
    """Every variable read as a number with a fraction (seconds, minutes, ...)."""
    names: list[str] = []
    for section in SETTINGS_SECTIONS.values():
        for field in section.model_fields.values():
            if field.annotation in (float, float | None):
                alias = field.validation_alias
                assert isinstance(alias, AliasChoices)
                names.extend(str(choice) for choice in alias.choices)
    return names


@pytest.mark.parametrize("name", float_variables())
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity"])
def test_non_finite_numbers_are_refused(name, value):
    """``inf`` passed ``gt=0`` and then overflowed a timeout at start-up (a traceback)."""
    assert "REDIS_SOCKET_TIMEOUT_SECONDS" in float_variables()
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"LLM_BACKEND": "offline", name: value}, env_file=None)
    assert any(problem.startswith(f"{name}:") for problem in raised.value.problems)


def test_cluster_mode_needs_redis_url_of_its_own():
    """No node is assumed (localhost:6379 may be anybody's); the private server is standalone."""
    with pytest.raises(SettingsError, match="REDIS_MODE=cluster needs REDIS_URL"):
        Settings.from_env({"LLM_BACKEND": "offline", "REDIS_MODE": "cluster"}, env_file=None)


def test_the_console_chooses_the_demo_model_only_when_nothing_names_a_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLM_BACKEND", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert offline_by_default()
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\n", encoding="utf-8")
    assert not offline_by_default()
    (tmp_path / ".env").write_text("OPENAI_API_KEY=\nLLM_BACKEND=\n", encoding="utf-8")
    assert offline_by_default()  # empty means not set
    monkeypatch.setenv("LLM_BACKEND", "openai")  # explicit: a missing key stays an error
    assert not offline_by_default()


def test_mcp_servers_that_is_not_json_is_one_line_naming_it(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLM_BACKEND", "offline")
    monkeypatch.setenv("MCP_SERVERS", '[{"name": "shop", "url": "https://shop.example/mcp"},]')
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(env_file=None)
    assert raised.value.problems == [
        "MCP_SERVERS: not valid JSON: Expecting value at line 1 column 54 "
        "(a trailing comma? an unquoted name?)"
    ]


class _JsonSection(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")

    mapping: dict[str, str] = Field(default_factory=dict, validation_alias=AliasChoices("SOME_MAP"))


def test_a_value_a_source_cannot_decode_is_one_line_naming_its_variable(monkeypatch):
    """Any JSON-typed setting: pydantic-settings' own error names only the field."""
    monkeypatch.setenv("SOME_MAP", '{"a": "secret-value",}')
    with pytest.raises(SourceError) as raised:
        _JsonSection()
    line = describe_source_error(_JsonSection, raised.value)
    assert line == "SOME_MAP: cannot be read: not valid JSON"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("Bearer abc\n", "starts or ends with a blank or a line break"),
        ("Bearer abc ", "starts or ends with a blank or a line break"),
        ("Bearer\nabc", "control character"),
        ("Bearer абв", "outside ASCII"),
        ("Bearer abc", None),
        ("Bearer\tabc", None),
    ],
)
def test_header_values_are_checked_and_never_quoted(value, problem):
    found = header_value_problem(value)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found
        assert "abc" not in found


def test_mcp_header_problems_name_the_variable_never_its_value():
    mcp = McpSettings(
        _env_file=None,
        MCP_SERVERS='[{"name": "shop", "url": "https://s.example/mcp", '
        '"headers_from_env": {"Authorization": "SHOP_AUTH", "X-Key": "SHOP_KEY"}}]',
    )
    problems = mcp_header_problems(mcp, {"SHOP_AUTH": "Bearer s3cr3t\n"})
    assert len(problems) == 2
    assert problems[0].startswith("MCP_SERVERS: server shop: header Authorization: the value of ")
    assert "SHOP_AUTH" in problems[0]
    assert "SHOP_KEY, which is not set" in problems[1]
    assert "s3cr3t" not in "".join(problems)
    assert mcp_header_problems(mcp, {"SHOP_AUTH": "Bearer s3cr3t", "SHOP_KEY": "k"}) == []
