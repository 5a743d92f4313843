"""`schedtune models load` and `--transformer-config` bound what they read before reading:
a file past an entry's size is refused after reading one byte past it, and what is not a
regular file (a directory, a FIFO, a device) is refused without being read or waited on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.user_models.entry import MAX_ENTRY_BYTES
from scripts import models

REPO = Path(__file__).resolve().parents[2]
SPARSE_BYTES = 400 << 20


def _bytes_read() -> int:
    return int(dict(line.split(": ") for line in Path("/proc/self/io").read_text()
                    .splitlines())["rchar"])


@pytest.fixture
def env(monkeypatch, redis_url, redis_client, tmp_path) -> Path:
    monkeypatch.setenv("REDIS_URL", redis_url)
    return tmp_path


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io")
@pytest.mark.parametrize("verb", [["load"], ["add", "x", "--no-export", "--transformer-config"]])
def test_a_huge_file_is_refused_having_read_one_byte_past_the_limit(env, capsys, verb) -> None:
    big = env / "big.json"
    with big.open("wb") as file:
        file.truncate(SPARSE_BYTES)  # sparse: no disk, but 400 MB to whoever reads it all
    before = _bytes_read()
    assert models.main([*verb, str(big)]) == 2
    assert _bytes_read() - before < 8 * MAX_ENTRY_BYTES
    err = capsys.readouterr().err
    assert f"larger than {MAX_ENTRY_BYTES} bytes" in err and str(big) in err
    assert models.main(["list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize("kind", ["directory", "fifo", "device"])
def test_what_is_not_a_regular_file_is_refused_unread(env, redis_url, kind) -> None:
    """In a process of its own: a FIFO read blocks, /dev/zero never ends."""
    path = {"directory": env, "fifo": env / "fifo", "device": Path("/dev/zero")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    done = subprocess.run([sys.executable, "-m", "scripts.models", "load", str(path)], cwd=REPO,
                          env={**os.environ, "REDIS_URL": redis_url}, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {path}: not a regular file", done.stderr


def test_redis_unavailable_says_how_to_get_one(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("EXTENDER_STATE_DIR", str(tmp_path))  # no embedded server running
    assert models.main(["list"]) == 3
    err = capsys.readouterr().err
    error, hint = err.strip().splitlines()
    assert error.startswith("error: state store unreachable")
    assert str(tmp_path) in hint and "schedtune serve" in hint and "REDIS_URL" in hint
