"""chaos/hostile.py: the catalogue carries what issue 14 lists."""

from __future__ import annotations

import json
import random

from chaos import hostile


def test_hostile_requests_carry_what_issue_14_lists() -> None:
    items = hostile.hostile_requests(random.Random(1), 400, auth=True)
    assert len(items) == 400
    assert set(kind for kind, _ in items) == set(hostile.GENERATORS)
    raw = [body for _, (_, body, _) in items if isinstance(body, bytes)]
    assert hostile.NESTED_JSON in raw and len(hostile.NESTED_JSON) >= 360_000
    text = json.dumps([body for _, (_, body, _) in items if not isinstance(body, bytes)])
    assert "0" * 5000 + "32" in text and "x" * 300 in text and "9" * 300 in text
    assert {auth for _, (_, _, auth) in items} == {"token", "none", "wrong"}
    no_auth = hostile.hostile_requests(random.Random(1), 400, auth=False)
    assert {auth for _, (_, _, auth) in no_auth} == {"token"}
