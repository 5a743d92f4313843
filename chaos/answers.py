"""One request to a replica and the outcome of its answer, judged against the verb's
contract (kube-scheduler's or Volcano's). A read timeout or a refused connection is an
outcome, never an exception.

Outcomes: ok; error (the contract's error field set, 200: kube-scheduler retries);
refused (4xx in the contract's shape); unauthorized (401/403); retriable (503 with the
error field); server_error (any other 5xx); non_contract (not the verb's JSON shape);
timeout (no answer in 5 s, kube-scheduler's httpTimeout); connection_error.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

import requests

HTTP_TIMEOUT_S = 5.0  # kube-scheduler's httpTimeout (k8s/scheduler-config.yaml)
NO_ANSWER = ("timeout", "connection_error")


@dataclass(frozen=True)
class Answer:
    """One answer: its outcome (see above), HTTP status (0: none came), decoded body (None:
    not JSON) and seconds from sending to the answer or the failure."""

    outcome: str
    status: int
    body: Any
    latency_s: float


def contract_error(verb: str, body: Any) -> str | None:
    """The error text of a `verb` answer ("" for none); None when `body` is not the verb's shape."""
    if verb == "prioritize" and isinstance(body, list):
        shaped = all(isinstance(h, dict) and {"Host", "Score"} <= h.keys() for h in body)
        return "" if shaped else None
    if not isinstance(body, dict):
        return None
    if verb == "volcano/predicate":
        if not isinstance(body.get("code"), int) or not isinstance(body.get("status"), str):
            return None
        return (body["status"] or "error") if body["code"] == 1 else ""  # 0, 2, 3: verdicts
    if verb == "volcano/prioritize" and not isinstance(body.get("nodeScore"), dict):
        return None
    key = {"volcano/prioritize": "errorMessage", "volcano/allocate": "error",
           "volcano/deallocate": "error"}.get(verb, "Error")
    error = body.get(key, "" if verb.startswith("volcano/") else None)
    return error if isinstance(error, str) else None


def outcome(verb: str, status: int, content: bytes) -> tuple[str, Any]:
    """(outcome, decoded body) of one answer; the outcomes are listed in the module doc."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if status in (401, 403):
        return "unauthorized", body
    error = contract_error(verb, body)
    if status >= 500:
        return ("retriable" if status == 503 and error else "server_error"), body
    if error is None:
        return "non_contract", body
    if status >= 400:
        return "refused", body
    return ("error" if error else "ok"), body


def post(http: requests.Session, url: str, verb: str, data: bytes, auth: str = "token") -> Answer:
    """POST `data` to `url`; `auth`: token (the session's), none, or wrong."""
    headers: dict[str, str | None] = {"Content-Type": "application/json"}
    if auth == "none":
        headers["Authorization"] = None  # drops the session's header
    elif auth == "wrong":
        headers["Authorization"] = f"Bearer {secrets.token_hex(16)}"
    started = time.monotonic()
    try:
        res = http.post(url, data=data, headers=headers, timeout=HTTP_TIMEOUT_S)
    except requests.Timeout:
        return Answer("timeout", 0, None, time.monotonic() - started)
    except requests.RequestException:
        return Answer("connection_error", 0, None, time.monotonic() - started)
    kind, body = outcome(verb, res.status_code, res.content)
    return Answer(kind, res.status_code, body, time.monotonic() - started)


def passing(answer: Answer) -> list[str]:
    """The node names a successful full-nodes filter answer kept."""
    if answer.outcome != "ok":
        return []
    return [n["metadata"]["name"] for n in (answer.body.get("Nodes") or {}).get("items") or []]
