"""`schedtune models`: bad files, entry points and entries are refused with a one-line
reason and publish nothing (real Redis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimator.transformer.config import shipped_configs
from scripts import models

CONFIG = {"kind": "decoder", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4,
          "intermediate": 128, "vocab": 1000, "max_position": 512}
FILES = {
    "empty": b"", "truncated": b'{"model_type": "lla', "bom": b"\xef\xbb\xbf{}",
    "utf16": "{}".encode("utf-16"), "deep": b"[" * 100_000,
    "type-list": b'{"model_type": ["llama"]}', "type-object": b'{"model_type": {}}',
}
MODULES = {"syntax": "def build(:\n", "raises": "raise RuntimeError('boom')\n",
           "exits": "import sys\n\n\ndef build():\n    sys.exit(3)\n"}


@pytest.fixture
def env(monkeypatch, redis_url, redis_client, tmp_path) -> Path:
    monkeypatch.setenv("REDIS_URL", redis_url)
    for name, code in MODULES.items():
        (tmp_path / f"{name}.py").write_text(code)
    return tmp_path


def _refused(argv: list[str], capsys, words: str) -> None:
    assert models.main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert models.main(["list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def _entry(tmp_path: Path, name: str, **changes) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "family": "f", "kind": "transformer",
                                "source": "c.json", "config": CONFIG, **changes}))
    return path


@pytest.mark.parametrize("name, words", [
    ("empty", "not valid JSON"), ("truncated", "not valid JSON"), ("bom", "not valid JSON"),
    ("utf16", "not UTF-8"), ("deep", "nested too deeply"),
    ("type-list", "model_type must be a string"), ("type-object", "model_type must be"),
])
def test_a_bad_transformer_config_file_is_refused(env, capsys, name, words) -> None:
    (env / "c.json").write_bytes(FILES[name])
    _refused(["add", "x", "--transformer-config", str(env / "c.json"), "--no-export"],
             capsys, words)


@pytest.mark.parametrize("target, words", [
    ("syntax:build", "SyntaxError"), ("raises:build", "RuntimeError: boom"),
    ("exits:build", "SystemExit: 3"), ("..rel:f", "absolute module name"),
])
def test_an_entry_point_that_fails_is_a_failed_build(env, capsys, target, words) -> None:
    _refused(["add", "x", "--entry-point", target, "--path", str(env), "--input",
              "image:3x16x16", "--no-export"], capsys, words)


@pytest.mark.parametrize("changes, words", [
    ({"config": {"foo": 1}}, "unknown config fields"),
    ({"config": {**CONFIG, "layers": -5}}, "layers must be"),
    ({"family": "f" * 257}, "at most 256 characters"),
])
def test_load_refuses_entries_the_extender_could_not_use(env, capsys, changes, words) -> None:
    _refused(["load", str(_entry(env, "mine", **changes))], capsys, words)


def test_load_checks_every_file_before_publishing_any(env, capsys) -> None:
    builtin = next(iter(shipped_configs()))
    _refused(["load", str(_entry(env, "mine")), str(_entry(env, builtin))], capsys,
             "is a built-in model")


def test_add_checks_family_and_export_before_publishing(env, capsys) -> None:
    (env / "c.json").write_text(json.dumps(CONFIG))
    add = ["add", "x", "--transformer-config", str(env / "c.json")]
    _refused([*add, "--no-export", "--family", "f" * 257], capsys, "--family must be")
    (env / "taken").write_text("")
    _refused([*add, "--export", str(env / "taken")], capsys, "is not a directory")
    assert models.main([*add, "--export", str(env / "out")]) == 0
    assert json.loads((env / "out" / "x.json").read_text())["config"]["layers"] == 2
