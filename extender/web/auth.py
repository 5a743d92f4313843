"""Who may call the verbs: the bearer token check, run before any verb's view.

Two layers, each set in extender/settings.py; k8s/ turns on the first:

* Mutual TLS (EXTENDER_TLS_CLIENT_CA_FILE): gunicorn refuses, during the handshake, a
  connection whose client certificate does not verify against that CA, before any
  request exists (extender/web/gunicorn.conf.py). This is kube-scheduler's credential:
  its extender `tlsConfig` presents a certificate, and it has no header or token option.
* A token (EXTENDER_AUTH_TOKEN_FILE), for callers that can send a header (tools, a
  proxy in front of Volcano): every verb of both contracts (/filter, /prioritize, /bind,
  /volcano/*) then needs `Authorization: Bearer <token>`, compared in constant time.
  A refusal raises `Unauthorized` (401) before the view runs, so the body is never read
  and Redis never touched; the blueprint's contract handler answers in the verb's error
  shape, logs it once and counts it (schedtune_extender_errors_total{kind="Unauthorized"}).

/healthz and /readyz (kubelet probes) and /metrics stay open to the token: /metrics is
read-only, its labels are verbs, outcomes and reason kinds (never pods, nodes or UIDs),
and Prometheus scrapers seldom carry an application token. With mutual TLS on, every
path, /metrics included, still needs a client certificate.

Must not import: redis, the store, the service (a refusal costs no I/O).
"""

from __future__ import annotations

import hashlib
import hmac

from flask import Blueprint, Flask, Response, request

from extender.errors import ExtenderError
from extender.settings import Settings

CHALLENGE = 'Bearer realm="schedtune"'  # RFC 6750: a 401 says how to authenticate


class Unauthorized(ExtenderError):
    """A verb was called without the token it needs, or with another one."""

    status = 401


def install(app: Flask, token: str | None, *blueprints: Blueprint) -> None:
    """Require `token` on every route of `blueprints` (no token: nothing to install)."""
    if not token:
        return
    guarded = frozenset(bp.name for bp in blueprints)
    expected = _digest(token.encode())

    def check_token() -> None:
        if request.blueprint not in guarded:
            return
        presented = bearer_token(request.headers.get("Authorization", ""))
        if presented is None:
            raise Unauthorized(f"no bearer token: send Authorization: Bearer <token> "
                               f"(request from {request.remote_addr})")
        if not hmac.compare_digest(_digest(presented), expected):
            raise Unauthorized(f"invalid bearer token (request from {request.remote_addr})")

    def add_challenge(response: Response) -> Response:
        if response.status_code == 401 and request.blueprint in guarded:
            response.headers["WWW-Authenticate"] = CHALLENGE
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


def describe(settings: Settings) -> str:
    """How callers authenticate, for the start-up log line: e.g. "mutual-tls+token"."""
    parts = ["mutual-tls"] if settings.tls_client_ca_file else []
    parts += ["token"] if settings.auth_token else []
    return "+".join(parts) or "none"


def _digest(secret: bytes) -> bytes:
    # Equal-length inputs for compare_digest: the time taken says nothing about the length.
    return hashlib.sha256(secret).digest()
