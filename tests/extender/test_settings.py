"""Settings from the environment: secrets read from files, mutual TLS needs HTTPS."""

from pathlib import Path

import pytest

from extender.settings import Settings, SettingsError


def test_secrets_come_from_files_and_short_or_missing_ones_are_refused(tmp_path) -> None:
    token, key = tmp_path / "token", tmp_path / "key"
    token.write_text("  a-token-of-32-characters-000000\n")
    key.write_bytes(b"k" * 32)
    settings = Settings.from_env({"EXTENDER_AUTH_TOKEN_FILE": str(token),
                                  "EXTENDER_SIGNING_KEY_FILE": str(key)})
    assert settings.auth_token == "a-token-of-32-characters-000000"
    assert settings.signing_key == b"k" * 32
    assert "a-token" not in repr(settings) and "kkkk" not in repr(settings)
    assert Settings.from_env({}).auth_token is None and Settings.from_env({}).signing_key is None
    (tmp_path / "short").write_text("short")
    with pytest.raises(SettingsError, match="EXTENDER_AUTH_TOKEN_FILE.*at least 16 bytes"):
        Settings.from_env({"EXTENDER_AUTH_TOKEN_FILE": str(tmp_path / "short")})
    with pytest.raises(SettingsError, match="EXTENDER_SIGNING_KEY_FILE.*cannot read"):
        Settings.from_env({"EXTENDER_SIGNING_KEY_FILE": str(tmp_path / "missing")})


def test_client_certificates_need_https() -> None:
    with pytest.raises(SettingsError, match="EXTENDER_TLS_CLIENT_CA_FILE needs"):
        Settings.from_env({"EXTENDER_TLS_CLIENT_CA_FILE": "/ca.pem"})
    settings = Settings.from_env({"EXTENDER_TLS_CLIENT_CA_FILE": "/ca.pem",
                                  "EXTENDER_TLS_CERT_FILE": "/tls.crt",
                                  "EXTENDER_TLS_KEY_FILE": "/tls.key"})
    assert settings.tls_client_ca_file == "/ca.pem"


@pytest.mark.parametrize(("env", "needle"), [
    ({"REDIS_URL": "foo://x"}, "expected a redis, rediss, unix URL"),
    ({"REDIS_URL": "redis://h:abc"}, "REDIS_URL='redis://h:abc'"),
    ({"REDIS_URL": "redis://127.0.0.1:99999"}, "out of range"),
    ({"EXTENDER_LOG_LEVEL": "FOO"}, "EXTENDER_LOG_LEVEL='FOO': expected one of DEBUG"),
    ({"EXTENDER_COLLOCATION_LIMITS": "K80=\u00b2"}, "expected TYPE=N"),
    ({"EXTENDER_COLLOCATION_LIMITS": "=3"}, "expected TYPE=N"),
    ({"EXTENDER_COLLOCATION_LIMITS": "T4=100000000000000000000000"}, "N in 1..1024"),
    ({"EXTENDER_COLLOCATION_LIMITS": "K8O=2"}, "'K8O' is no GPU type of the catalogue"),
    ({"EXTENDER_SHORT_FIRST": "0.5"}, "EXTENDER_SHORT_FIRST='0.5': 0 (off) or how many"),
    ({"EXTENDER_SHORT_FIRST": "-1"}, "EXTENDER_SHORT_FIRST='-1': expected a number in 0..1000"),
    ({"EXTENDER_WAIT_FOR_FASTER": "1"}, "EXTENDER_WAIT_FOR_FASTER='1': 0 (off) or how many"),
    ({"EXTENDER_WAIT_FOR_FASTER": "0.5"}, "EXTENDER_WAIT_FOR_FASTER='0.5': 0 (off)"),
    ({"EXTENDER_WAIT_FOR_FASTER": "1_5"}, "EXTENDER_WAIT_FOR_FASTER='1_5': expected a number"),
    ({"EXTENDER_HOLD_FOR": "1_0"}, "EXTENDER_HOLD_FOR='1_0': expected a number in 0..64"),
    ({"EXTENDER_HOLD_FOR": "_1"}, "EXTENDER_HOLD_FOR='_1': expected a number in 0..64"),
    ({"EXTENDER_PRICE_AHEAD": "yes"}, "EXTENDER_PRICE_AHEAD='yes': expected one of 0, 1"),
])
def test_values_no_process_could_use_are_refused_naming_the_variable(env, needle) -> None:
    with pytest.raises(SettingsError) as exc:
        Settings.from_env(env)
    assert needle in str(exc.value)


def test_usable_redis_urls_log_levels_and_limits_are_kept(tmp_path) -> None:
    for url in ("redis://redis:6379/0", "rediss://:pw@host:6380", "unix:///var/r.sock?db=0"):
        assert Settings.from_env({"REDIS_URL": url}).redis_url == url
    for level in ("warn", "FATAL", "notset"):  # names logging accepts: they worked before
        assert Settings.from_env({"EXTENDER_LOG_LEVEL": level}).log_level == level.upper()
    settings = Settings.from_env({"EXTENDER_LOG_LEVEL": "debug",
                                  "EXTENDER_COLLOCATION_LIMITS": " K80 = 2, unknown=1 "})
    assert settings.log_level == "DEBUG"
    assert dict(settings.collocation.per_type) == {"K80": 2, "unknown": 1}
    (tmp_path / "token").write_bytes("a-token-\u00e9\u00e9\u00e9\u00e9\u00e9-of-bytes".encode("latin-1"))
    with pytest.raises(SettingsError, match="must be ASCII"):
        Settings.from_env({"EXTENDER_AUTH_TOKEN_FILE": str(tmp_path / "token")})


def test_the_models_dir_is_where_the_app_loads_its_artefacts_from(tmp_path, redis_url) -> None:
    from estimator.errors import ArtefactError
    from extender.web.app import create_app

    with pytest.raises(SettingsError, match="EXTENDER_MODELS_DIR='/nonexistent': not a directory"):
        Settings.from_env({"EXTENDER_MODELS_DIR": "/nonexistent"})
    settings = Settings.from_env({"EXTENDER_MODELS_DIR": str(tmp_path), "REDIS_URL": redis_url,
                                  "EXTENDER_NODE_WATCH": "0", "EXTENDER_BIND": "record"})
    assert settings.models_dir == tmp_path
    with pytest.raises(ArtefactError, match=f"missing in {tmp_path}"):  # read there, not elsewhere
        create_app(settings)


def test_serve_listens_on_loopback_unless_told_and_the_deployment_tells_it() -> None:
    import yaml

    assert Settings.from_env({}).bind_address == "127.0.0.1:8888"
    manifest = Path(__file__).resolve().parents[2] / "k8s" / "extender.yaml"
    deployment = next(d for d in yaml.safe_load_all(manifest.read_text())
                      if d and d.get("kind") == "Deployment")
    env = {e["name"]: e.get("value") for e in
           deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["EXTENDER_BIND_ADDRESS"] == "0.0.0.0:8888"
