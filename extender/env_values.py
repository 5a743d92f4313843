"""Reading one environment variable and checking it: a choice, a number in a range, a
secret from a file, a directory, the one Redis target. Each bad value raises
`SettingsError` naming the variable (`extender.settings` builds the service's settings
from these)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from extender.redis_url import SentinelTarget, parse_address, sentinel_url

REDIS_SCHEMES = ("redis", "rediss", "unix")


class SettingsError(ValueError):
    """An environment variable has a value the service cannot use."""


def choice(env: Mapping[str, str], key: str, default: str, accepted: tuple[str, ...],
            normalise: Callable[[str], str] = str) -> str:
    value = normalise(env.get(key, default))
    if value not in accepted:
        raise SettingsError(f"{key}={value!r}: expected one of {', '.join(accepted)}")
    return value


def number(env: Mapping[str, str], key: str, default, kind, low, high):  # type: ignore[no-untyped-def]
    raw = env.get(key)
    if raw is None or raw == "":
        return default
    try:
        if "_" in raw:  # Python reads "1_5" as 15
            raise ValueError(raw)
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"{key}={raw!r}: expected a number in {low}..{high}") from None
    if not low <= value <= high:
        raise SettingsError(f"{key}={raw!r}: expected a number in {low}..{high}")
    return value


def secret(env: Mapping[str, str], key: str, min_bytes: int) -> bytes:
    """The contents of the file `key` names, surrounding whitespace stripped (b"": unset)."""
    path = env.get(key)
    if not path:
        return b""
    try:
        value = Path(path).read_bytes().strip()
    except OSError as exc:
        raise SettingsError(f"{key}={path!r}: cannot read it ({exc.strerror})") from None
    if len(value) < min_bytes:
        raise SettingsError(f"{key}={path!r}: expected at least {min_bytes} bytes of secret")
    return value


def text_secret(env: Mapping[str, str], key: str, min_bytes: int) -> str:
    """`secret` as text (a bearer token travels in an HTTP header: ASCII only)."""
    value = secret(env, key, min_bytes)
    if not value.isascii():
        raise SettingsError(f"{key}={env[key]!r}: the token must be ASCII text")
    return value.decode()


def directory(env: Mapping[str, str], key: str) -> Path | None:
    path = env.get(key)
    if not path:
        return None
    if not Path(path).is_dir():
        raise SettingsError(f"{key}={path!r}: not a directory")
    return Path(path)


def redis_target(env: Mapping[str, str]) -> str | None:
    """The one Redis URL of the environment: REDIS_URL (a single server), or the master
    that REDIS_SENTINELS' sentinels name (`redis_url.sentinel_url`); never both."""
    single, sentinels = env.get("REDIS_URL") or None, env.get("REDIS_SENTINELS", "").strip()
    if not sentinels:
        for key in ("REDIS_SENTINEL_MASTER", "REDIS_SENTINEL_PASSWORD", "REDIS_PASSWORD"):
            if env.get(key):
                raise SettingsError(f"{key} is set but REDIS_SENTINELS is not: put a single "
                                    "Redis's password in REDIS_URL (redis://:password@host)")
        return redis_url(single)
    if single:
        raise SettingsError("REDIS_URL and REDIS_SENTINELS are both set: one Redis, or the "
                            "master the sentinels name, not both")
    try:
        addresses = tuple(parse_address(item) for item in sentinels.split(",") if item.strip())
    except ValueError as exc:
        raise SettingsError(f"REDIS_SENTINELS={sentinels!r}: {exc} (host:port,host:port)") \
            from None
    master = env.get("REDIS_SENTINEL_MASTER", "mymaster").strip()
    if not master or not master.isprintable() or " " in master:
        raise SettingsError(f"REDIS_SENTINEL_MASTER={master!r}: a master name as the "
                            "sentinels' configuration spells it (sentinel monitor NAME ...)")
    db = number(env, "REDIS_SENTINEL_DB", 0, int, 0, 15)
    return sentinel_url(SentinelTarget(addresses, master, db, env.get("REDIS_PASSWORD") or None,
                                       env.get("REDIS_SENTINEL_PASSWORD") or None))


def redis_url(url: str | None) -> str | None:
    """REDIS_URL as redis-py reads it: redis://, rediss:// or unix://, a port in range."""
    if url is None:
        return None
    try:
        parsed = urlsplit(url)
        parsed.port  # noqa: B018 (raises ValueError when it is not a port)
    except ValueError as exc:
        raise SettingsError(f"REDIS_URL={url!r}: {exc}") from None
    if parsed.scheme not in REDIS_SCHEMES:
        raise SettingsError(f"REDIS_URL={url!r}: expected a {', '.join(REDIS_SCHEMES)} URL")
    return url
