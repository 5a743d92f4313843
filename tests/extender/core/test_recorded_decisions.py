"""Filter and prioritize decide exactly as the per-node code did on a recorded sequence.

`tests/data/decisions/recorded.json` was written by `decision_cases` with the code
before vectorisation: verdicts (fits, reason, GPU, unresolvable), what filter keeps
for bind, waiters, decisions told, holds, and every policy's scores, bit for bit;
each case is decided over arrays and node by node. Re-recorded on 2026-12-06 when nodes
alike in time and fit came to keep the top score together (5,247 scores went from 0.9 to
1.0; nothing else changed).
"""

from __future__ import annotations

import json

import pytest

from extender.core import gpu_table
from extender.state.store import RedisStore
from tests.extender.core import decision_cases as cases


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(cases.RECORDED.read_text())


@pytest.fixture(params=["arrays", "node by node"], autouse=True)
def path(request, monkeypatch) -> str:
    """Every case decided both ways: over a `GpuTable` and node by node (`core.per_node`)."""
    monkeypatch.setattr(gpu_table, "ARRAYS_FROM", 0 if request.param == "arrays" else 10**9)
    return request.param


def _compare(got: dict, want: dict, where: str) -> None:
    for key in want:
        assert got[key] == want[key], f"{where}: {key} differs"


def test_pure_cases_decide_as_recorded(recorded) -> None:
    reasons = {text: i for i, text in enumerate(recorded["reasons"])}
    count = 0
    for i, (job, settings) in enumerate(cases.pure_cases()):
        got = cases.decisions(job, settings, {n: None for n in job.snapshot.nodes}, reasons)
        _compare(got, recorded["pure"][i], f"pure case {i}")
        count += 1
    assert count == len(recorded["pure"]) and len(reasons) == len(recorded["reasons"])


def test_cases_read_through_the_store_decide_as_recorded(recorded, redis_client,
                                                         redis_url) -> None:
    reasons = {text: i for i, text in enumerate(recorded["reasons"])}
    for i, case in enumerate(cases.store_cases()):
        redis_client.flushdb()
        job, settings, layouts = cases.load_store_case(RedisStore.from_url(redis_url), case)
        got = cases.decisions(job, settings, layouts, reasons)
        _compare(got, recorded["store"][i], f"store case {i}")
    assert len(reasons) == len(recorded["reasons"])


def test_a_changed_decision_is_caught(recorded) -> None:
    """The comparison can fail: a case decided with another policy's scores differs."""
    job, settings = next(iter(cases.pure_cases()))
    got = cases.decisions(job, settings, {n: None for n in job.snapshot.nodes},
                          {t: i for i, t in enumerate(recorded["reasons"])})
    got["scores"]["marginal"], got["scores"]["paper"] = got["scores"]["paper"], got["scores"]["marginal"]
    if got["scores"]["marginal"] == got["scores"]["paper"]:
        got["verdicts"] = got["verdicts"][::-1] + [[True, 0, 0, False]]
    with pytest.raises(AssertionError):
        _compare(got, recorded["pure"][0], "pure case 0")


def test_shortest_first_holds_decide_the_same_over_arrays_and_node_by_node(monkeypatch) -> None:
    """With shortest-job-first holds on (the default, not in the recording), both paths
    decide every pure case identically, and the holds change some decisions."""
    from dataclasses import replace

    changed = 0
    for job, settings in cases.pure_cases():
        on = replace(settings, short_first=4.0)
        got = []
        for arrays_from in (0, 10**9):
            monkeypatch.setattr(gpu_table, "ARRAYS_FROM", arrays_from)
            got.append(cases.decisions(job, on, {n: None for n in job.snapshot.nodes}, {}))
        assert got[0] == got[1]
        changed += got[0] != cases.decisions(job, settings, {n: None for n in job.snapshot.nodes},
                                             {})
    assert changed
