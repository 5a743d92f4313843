"""chaos/answers.py: no answer is an outcome, not an exception; every outcome follows the
verb's contract."""

from __future__ import annotations

import socket

import pytest
import requests

from chaos import answers


def test_no_answer_is_an_outcome_not_an_exception(monkeypatch) -> None:
    monkeypatch.setattr(answers, "HTTP_TIMEOUT_S", 0.2)
    with socket.socket() as server, requests.Session() as http:
        server.bind(("127.0.0.1", 0))
        server.listen()  # the kernel accepts; nobody ever answers
        url = f"http://127.0.0.1:{server.getsockname()[1]}/filter"
        assert answers.post(http, url, "filter", b"{}").outcome == "timeout"
        server.close()
        assert answers.post(http, url, "filter", b"{}").outcome == "connection_error"


@pytest.mark.parametrize(("verb", "status", "content", "expected"), [
    ("filter", 200, b'{"Nodes": null, "NodeNames": [], "FailedNodes": {}, "Error": ""}', "ok"),
    ("filter", 200, b'{"Error": "store unreachable; retry"}', "error"),
    ("filter", 400, b'{"Error": "body is not valid JSON"}', "refused"),
    ("prioritize", 503, b'{"Error": "retry"}', "retriable"),
    ("prioritize", 503, b"<html>busy</html>", "server_error"),
    ("filter", 500, b"<html>Internal Server Error</html>", "server_error"),
    ("bind", 502, b'{"Error": "x"}', "server_error"),
    ("filter", 400, b"<html>Bad Request</html>", "non_contract"),
    ("bind", 401, b"", "unauthorized"),
    ("prioritize", 200, b'[{"Host": "gpu-0", "Score": 3}]', "ok"),
    ("volcano/predicate", 200, b'{"status": "no room", "code": 2}', "ok"),
    ("volcano/predicate", 200, b'{"status": "bad", "code": 1}', "error"),
    ("volcano/allocate", 200, b"{}", "ok"),
    ("volcano/allocate", 503, b'{"error": "retry"}', "retriable"),
])
def test_outcomes_follow_each_contract(verb: str, status: int, content: bytes,
                                       expected: str) -> None:
    assert answers.outcome(verb, status, content)[0] == expected
