"""Where the state's Redis is, as one string: a single server's URL (``redis://``,
``rediss://``, ``unix://``), or the master that Redis Sentinel names,

    redis+sentinel://[:password@]host:port[,host:port...]/master-name/db[?sentinel_password=]

built by `sentinel_url` from the settings (REDIS_SENTINELS and friends), so that a process
can hand its store to another (a replay's worker, a chaos replica) as one string, as it
does a single server's URL. Pure string handling: `state.connection` opens them.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

SENTINEL_SCHEME = "redis+sentinel"


@dataclass(frozen=True)
class SentinelTarget:
    """Where Sentinel is asked for the master, and what to authenticate with."""

    addresses: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    password: str | None = None  # the master's and replicas' (requirepass)
    sentinel_password: str | None = None  # the sentinels' own (requirepass in sentinel mode)


def sentinel_url(target: SentinelTarget) -> str:
    hosts = ",".join(f"{host}:{port}" for host, port in target.addresses)
    auth = f":{urllib.parse.quote(target.password, safe='')}@" if target.password else ""
    query = (f"?sentinel_password={urllib.parse.quote(target.sentinel_password, safe='')}"
             if target.sentinel_password else "")
    return (f"{SENTINEL_SCHEME}://{auth}{hosts}/{urllib.parse.quote(target.master, safe='')}"
            f"/{target.db}{query}")


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The target of a `sentinel_url`; ValueError says what is wrong with another."""
    scheme, sep, rest = url.partition("://")
    if scheme != SENTINEL_SCHEME or not sep:
        raise ValueError(f"expected a {SENTINEL_SCHEME}:// URL")
    rest, _, query = rest.partition("?")
    auth, at, rest = rest.rpartition("@")
    hosts, _, path = rest.partition("/")
    master, _, db = path.partition("/")
    addresses = tuple(parse_address(item) for item in hosts.split(",") if item)
    if not addresses:
        raise ValueError("no sentinel address")
    if not master:
        raise ValueError("no master name")
    if db and not (db.isascii() and db.isdigit()):
        raise ValueError(f"database {db!r} is not a number")
    options = dict(urllib.parse.parse_qsl(query))
    password = urllib.parse.unquote(auth.partition(":")[2]) if at else None
    return SentinelTarget(addresses, urllib.parse.unquote(master), int(db or 0),
                          password or None, options.get("sentinel_password") or None)


def parse_address(item: str) -> tuple[str, int]:
    """host:port (a port in range); ValueError otherwise."""
    host, colon, port = item.strip().rpartition(":")
    if not colon or not host or not (port.isascii() and port.isdigit()) \
            or not 0 < int(port) < 65536:
        raise ValueError(f"{item.strip()!r} is not host:port")
    return host.strip("[]"), int(port)


def with_db(url: str, db: int) -> str:
    """The same server (or Sentinel master), database `db`."""
    if url.startswith(f"{SENTINEL_SCHEME}://"):
        target = parse_sentinel_url(url)
        return sentinel_url(SentinelTarget(target.addresses, target.master, db,
                                           target.password, target.sentinel_password))
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "unix":  # unix:///path?db=N: urlunsplit would drop the empty host
        base, _, query = url.partition("?")
        pairs = dict(urllib.parse.parse_qsl(query))
        pairs["db"] = str(db)
        return f"{base}?{urllib.parse.urlencode(pairs)}"
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


def display(url: str) -> str:
    """`url` without its credentials, for logs."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}".partition("?")[0]
