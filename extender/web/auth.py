"""Who may call the verbs and open the status page: the token check, run before any view.

Two layers, each set in extender/settings.py; k8s/ turns on the first:

* Mutual TLS (EXTENDER_TLS_CLIENT_CA_FILE): gunicorn refuses, during the handshake, a
  connection whose client certificate does not verify against that CA, before any
  request exists (extender/web/gunicorn.conf.py). This is kube-scheduler's credential:
  its extender `tlsConfig` presents a certificate, and it has no header or token option.
  It covers every path, the status page included.
* A token (EXTENDER_AUTH_TOKEN_FILE), for callers that can send a header (tools, a
  proxy in front of Volcano, a browser): every verb of both contracts (/filter,
  /prioritize, /bind, /volcano/*) then needs `Authorization: Bearer <token>`, compared in
  constant time. The status page (/ui and what it fetches) takes that header too, or HTTP
  Basic credentials whose password is the token (any user name): its 401 carries a Basic
  challenge, so a browser asks for them once and re-sends them with the page's fetches.
  The verbs accept Bearer only (docs/security.md: why Basic would leak Volcano's token).
  A refusal raises `Unauthorized` (401) before the view runs, so the body is never read
  and Redis never touched; the blueprint's error handler answers in its own shape (the
  verb's contract error, the page's JSON), logs it once and counts it
  (schedtune_extender_errors_total{kind="Unauthorized"}).

/healthz and /readyz (kubelet probes) and /metrics stay open to the token: /metrics is
read-only, its labels are verbs, outcomes and reason kinds (never pods, nodes or UIDs),
and Prometheus scrapers seldom carry an application token. With mutual TLS on, every
path, /metrics included, still needs a client certificate.

Must not import: redis, the store, the service (a refusal costs no I/O).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Iterable
from typing import NamedTuple

from flask import Blueprint, Flask, Response, request

from extender.errors import ExtenderError
from extender.settings import Settings

CHALLENGE = 'Bearer realm="schedtune"'  # RFC 6750: a 401 says how to authenticate
PAGE_CHALLENGE = 'Basic realm="schedtune"'  # RFC 7617: a browser prompts, then re-sends


class Unauthorized(ExtenderError):
    """A guarded route was called without the token it needs, or with another one."""

    status = 401


class _Guard(NamedTuple):
    """How one kind of route takes the token (_VERBS, _PAGES at the end of the module)."""

    secret: str  # what a refusal names
    how: str  # how to send it
    read: Callable[[str], bytes | None]  # the token an Authorization header presents
    challenge: str


def install(app: Flask, token: str | None, *blueprints: Blueprint,
            pages: Iterable[Blueprint] = ()) -> None:
    """Require `token` on every route of `blueprints` (as a Bearer token) and of `pages`
    (Bearer, or Basic with the token as password). No token: nothing to install."""
    if not token:
        return
    guards = {bp.name: _VERBS for bp in blueprints} | {bp.name: _PAGES for bp in pages}
    expected = _digest(token.encode())

    def check_token() -> None:
        guard = guards.get(request.blueprint or "")
        if guard is None:
            return
        presented = guard.read(request.headers.get("Authorization", ""))
        if presented is None:
            raise Unauthorized(f"no {guard.secret}: send {guard.how} "
                               f"(request from {request.remote_addr})")
        if not hmac.compare_digest(_digest(presented), expected):
            raise Unauthorized(f"invalid {guard.secret} (request from {request.remote_addr})")

    def add_challenge(response: Response) -> Response:
        guard = guards.get(request.blueprint or "")
        if response.status_code == 401 and guard is not None:
            response.headers["WWW-Authenticate"] = guard.challenge
        return response

    app.before_request(check_token)
    app.after_request(add_challenge)


def bearer_token(header: str) -> bytes | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive, as
    RFC 7235 has it); None for a missing header, another scheme or an empty token."""
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value:
        return None
    # WSGI hands headers over as latin-1 text: this gives back the bytes that were sent.
    return value.encode("latin-1")


def basic_password(header: str) -> bytes | None:
    """The password of an `Authorization: Basic <base64 of user:password>` header (the user
    name is ignored); None for a missing header, another scheme, bad base64, no colon or
    an empty password."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip().encode("latin-1"), validate=True)
    except binascii.Error:
        return None
    _, colon, password = decoded.partition(b":")
    return password if colon and password else None


def page_token(header: str) -> bytes | None:
    """The token a browser or a tool presents to the status page: Bearer or Basic."""
    return bearer_token(header) or basic_password(header)


def describe(settings: Settings) -> str:
    """How callers authenticate, for the start-up log line: e.g. "mutual-tls+token"."""
    parts = ["mutual-tls"] if settings.tls_client_ca_file else []
    parts += ["token"] if settings.auth_token else []
    return "+".join(parts) or "none"


def _digest(secret: bytes) -> bytes:
    # Equal-length inputs for compare_digest: the time taken says nothing about the length.
    return hashlib.sha256(secret).digest()


_VERBS = _Guard("bearer token", "Authorization: Bearer <token>", bearer_token, CHALLENGE)
_PAGES = _Guard("credentials", "HTTP Basic with the token as password, or Authorization: "
                "Bearer <token>", page_token, PAGE_CHALLENGE)
