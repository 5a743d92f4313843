"""chaos/audit.py: replaced workers are counted from gunicorn's log, with their reasons."""

from __future__ import annotations

from collections import Counter

from chaos.audit import worker_deaths


def test_replaced_workers_are_counted_from_gunicorns_log() -> None:
    log = "\n".join([
        "[1] [INFO] Booting worker with pid: 11", "[1] [INFO] Booting worker with pid: 12",
        "[1] [WARNING] Worker (pid:11) was sent SIGSEGV!", "[1] [INFO] Booting worker with pid: 13",
        "[1] [CRITICAL] WORKER TIMEOUT (pid:12)",
        "[1] [ERROR] Worker (pid:12) was sent SIGKILL! Perhaps out of memory?",
        "[1] [INFO] Booting worker with pid: 14"])
    replaced, reasons = worker_deaths(log, workers=2)
    assert replaced == 2
    assert reasons == Counter({"Worker was sent SIGSEGV": 1, "WORKER TIMEOUT": 1,
                               "Worker was sent SIGKILL": 1})
    assert worker_deaths(log.split("\n[1] [WARNING]")[0], workers=2)[0] == 0
