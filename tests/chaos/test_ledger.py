"""chaos/ledger.py: a thread that dies is recorded with its exception, and fails the run."""

from __future__ import annotations

import requests

from chaos.ledger import Ledger
from chaos.report import judge
from tests.chaos.test_report import clean_report


def test_a_thread_that_dies_is_reported_with_its_exception_and_fails_the_run() -> None:
    ledger = Ledger()

    def racer() -> None:
        raise requests.ReadTimeout("read timed out")

    ledger.run([ledger.thread("racer-0", racer), ledger.thread("racer-1", lambda: None)])
    assert ledger.deaths == ["racer-0: ReadTimeout: read timed out"]
    assert judge(clean_report(thread_deaths=ledger.deaths)) == [
        "thread died: racer-0: ReadTimeout: read timed out"]
