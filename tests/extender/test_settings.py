"""Settings from the environment: secrets read from files, mutual TLS needs HTTPS."""

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
