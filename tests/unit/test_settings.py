"""Settings from `STREAMCRAWL_*`: nesting, librdkafka pass-through, secrets that never print."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping

import pytest
from pydantic import SecretStr, ValidationError

from streamcrawl.settings import KafkaSettings, Settings

# librdkafka properties (CONFIGURATION.md) that hold credentials or private keys.
SECRET_KEYS = [
    "sasl.password",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.key.pem",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
]
PLAIN_CONFIG = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "crawler",
    "ssl.ca.location": "/etc/ssl/ca.pem",
    "a.property.from.a.future.librdkafka": "kept as given",
    "linger.ms": "7",
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No STREAMCRAWL_* variable of the developer's shell leaks into a test."""
    for name in list(os.environ):
        if name.upper().startswith("STREAMCRAWL_"):
            monkeypatch.delenv(name)
    yield


def _secret_value(key: str) -> str:
    return f"s3cret-for-{key}"


def _with_config(monkeypatch: pytest.MonkeyPatch, config: Mapping[str, object]) -> Settings:
    monkeypatch.setenv("STREAMCRAWL_KAFKA__CONFIG", json.dumps(config))
    return Settings()


def test_defaults_need_no_environment() -> None:
    settings = Settings()

    assert settings.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert settings.kafka.librdkafka() == {"bootstrap.servers": "127.0.0.1:9092"}
    assert settings.kafka.topic_prefix == "crawl."


def test_variables_take_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_LEVEL", "ERROR")
    monkeypatch.setenv("STREAMCRAWL_CRASH_AT", "before-commit")
    assert Settings().log_level == "INFO", "unprefixed variables are not ours"
    assert Settings().crash_at == "before-commit"

    monkeypatch.setenv("STREAMCRAWL_LOG_LEVEL", "DEBUG")
    assert Settings().log_level == "DEBUG"


def test_only_a_given_instance_id_makes_a_static_member(monkeypatch: pytest.MonkeyPatch) -> None:
    default = Settings()
    assert default.instance_id.endswith(f"-{os.getpid()}")
    assert not default.static_member, "host-pid is new at every start: nothing to keep"

    monkeypatch.setenv("STREAMCRAWL_INSTANCE_ID", "fetcher-0")
    assert Settings().static_member
    assert Settings().model_copy(update={"log_level": "DEBUG"}).static_member
    assert Settings(instance_id="fetcher-1").static_member

    monkeypatch.setenv("STREAMCRAWL_LOOP__STATIC_MEMBERSHIP", "false")
    assert not Settings().static_member


def test_nested_fields_use_double_underscore(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMCRAWL_KAFKA__BOOTSTRAP_SERVERS", "broker-1:9092,broker-2:9092")
    monkeypatch.setenv("STREAMCRAWL_KAFKA__PARTITIONS", "12")
    monkeypatch.setenv("STREAMCRAWL_LOOP__BATCH_SIZE", "7")
    monkeypatch.setenv("STREAMCRAWL_HTTP__PORT", "9100")

    settings = Settings()

    assert settings.kafka.bootstrap_servers == "broker-1:9092,broker-2:9092"
    assert settings.kafka.partitions == 12
    assert settings.loop.batch_size == 7
    assert settings.http.port == 9100
    assert settings.kafka.librdkafka()["bootstrap.servers"] == "broker-1:9092,broker-2:9092"


def test_nested_values_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMCRAWL_LOOP__BATCH_SIZE", "0")

    with pytest.raises(ValidationError, match="batch_size"):
        Settings()


def test_any_librdkafka_property_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _with_config(monkeypatch, PLAIN_CONFIG)

    assert settings.kafka.librdkafka() == {"bootstrap.servers": "127.0.0.1:9092", **PLAIN_CONFIG}
    assert settings.kafka.redacted() == settings.kafka.librdkafka()


def test_json_numbers_become_librdkafka_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _with_config(monkeypatch, {"linger.ms": 7, "batch.num.messages": 10000})

    assert settings.kafka.librdkafka()["linger.ms"] == "7"
    assert settings.kafka.librdkafka()["batch.num.messages"] == "10000"


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secrets_never_print_but_reach_librdkafka(
    monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    secret = _secret_value(key)
    settings = _with_config(monkeypatch, {**PLAIN_CONFIG, key: secret})

    assert isinstance(settings.kafka.config[key], SecretStr)
    for shown in (
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        repr(settings.kafka),
        json.dumps(settings.kafka.redacted()),
    ):
        assert secret not in shown
    assert settings.kafka.redacted()[key] == "**********"
    assert settings.kafka.librdkafka()[key] == secret
    assert settings.kafka.librdkafka()["security.protocol"] == "SASL_SSL"


def test_secrets_are_wrapped_when_built_in_code_too() -> None:
    kafka = KafkaSettings(config={"SASL.PASSWORD": "hunter2", "sasl.username": "crawler"})

    assert isinstance(kafka.config["SASL.PASSWORD"], SecretStr)
    assert kafka.config["sasl.username"] == "crawler"
    assert "hunter2" not in repr(kafka)
    assert kafka.librdkafka()["SASL.PASSWORD"] == "hunter2"


def test_a_malformed_config_does_not_echo_its_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMCRAWL_KAFKA__CONFIG", '["sasl.password=hunter2"]')

    with pytest.raises(ValidationError) as caught:
        Settings()
    assert "kafka.config" in str(caught.value)
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(caught.value)
    with pytest.raises(ValidationError) as direct:
        KafkaSettings(config=["sasl.password=hunter2"])  # type: ignore[arg-type]
    assert "hunter2" not in str(direct.value)


def test_plain_values_stay_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _with_config(monkeypatch, {"sasl.password": "x", **PLAIN_CONFIG})

    for key, value in PLAIN_CONFIG.items():
        assert settings.kafka.config[key] == value
        assert settings.kafka.redacted()[key] == value


def test_rendered_configs_are_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _with_config(monkeypatch, {"sasl.password": "x"})

    settings.kafka.librdkafka()["sasl.password"] = "changed"
    settings.kafka.redacted()["bootstrap.servers"] = "changed"

    assert settings.kafka.librdkafka() == {
        "bootstrap.servers": "127.0.0.1:9092",
        "sasl.password": "x",
    }


def test_settings_are_frozen() -> None:
    settings = Settings()

    with pytest.raises(ValidationError, match="frozen"):
        settings.log_level = "DEBUG"
    with pytest.raises(ValidationError, match="frozen"):
        settings.kafka.bootstrap_servers = "elsewhere:9092"
    with pytest.raises(ValidationError, match="frozen"):
        settings.loop.batch_size = 1
