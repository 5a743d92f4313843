"""Whatever `schedtune models` prints from stored or user data reaches the terminal with its
control characters escaped: an entry written straight into Redis (past every check, as a
hostile writer would) cannot clear the screen or retitle the window."""

from __future__ import annotations

import json

import orjson
import pytest

from scripts import models

CONFIG = {"kind": "decoder", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4,
          "intermediate": 128, "vocab": 1000, "max_position": 512}
HOSTILE = {"family": "f\x1b[2J", "source": "s\x9b31m\x07\x7f"}  # ESC, C1 CSI, BEL, DEL
KEY = "evil\x1b]0;owned\x07"  # the registry's hash field: no reader checks it
CONTROL = [chr(c) for c in [*range(0x20), *range(0x7f, 0xa0)] if chr(c) != "\n"]


def _entry(name: str) -> bytes:
    return orjson.dumps({"name": name, "kind": "transformer", "config": CONFIG, **HOSTILE})


@pytest.fixture
def env(monkeypatch, redis_url, store, tmp_path):
    monkeypatch.setenv("REDIS_URL", redis_url)
    store.models.publish("evil", _entry("evil"))
    store.models.publish(KEY, b'{"name": "x\x1b[2J"}')
    return tmp_path


def _printed(capsys) -> str:
    out, err = capsys.readouterr()
    text = out + err
    assert not [c for c in CONTROL if c in text], repr(text)
    return out


def test_list_and_show_print_no_control_characters(env, capsys) -> None:
    assert models.main(["list"]) == 0
    out = _printed(capsys)
    assert "f\\x1b[2J" in out and "evil\\x1b]0;owned\\x07" in out
    assert models.main(["show", "evil"]) == 0
    assert json.loads(_printed(capsys))["source"] == HOSTILE["source"]  # still the JSON
    assert models.main(["show", KEY]) == 2  # unusable: refused, escaped
    _printed(capsys)
    assert models.main(["show", "no\x1b[2J"]) == 1
    _printed(capsys)


def test_list_json_is_the_data_as_valid_json_without_raw_control_characters(env,
                                                                            capsys) -> None:
    assert models.main(["list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(_printed(capsys))}
    assert rows["evil"]["family"] == HOSTILE["family"] and KEY in rows


def test_load_prints_names_fields_and_errors_escaped(env, capsys) -> None:
    good = env / "mine.json"
    good.write_bytes(_entry("mine"))
    assert models.main(["load", str(good)]) == 0
    assert "family f\\x1b[2J" in _printed(capsys)
    bad = env / "bad\x1b[2J.json"
    bad.write_bytes(b"{}")
    assert models.main(["load", str(bad)]) == 2
    _printed(capsys)
