"""`schedtune models add --entry-point` builds the user's model in a process of its own: a
factory that hangs is killed at --timeout, one that ends its process is a failed build, and
one that raises is one line; each exits 2 having registered nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FACTORIES = {
    "hangs": "import os, sys, time\n\n\ndef build():\n"
             "    print('ready', os.getpid(), file=sys.stderr, flush=True)\n"
             "    time.sleep(1000)\n",
    "quits": "import os\n\n\ndef build():\n    os._exit(0)\n",
    "raises": "def build():\n    raise ValueError('no such layer: conv9')\n",
}


@pytest.fixture
def run(redis_url, redis_client, tmp_path):
    """`schedtune models ARGS` in a process of its own: (exit status, stderr's lines)."""
    for name, code in FACTORIES.items():
        (tmp_path / f"{name}.py").write_text(code)
    env = {**os.environ, "REDIS_URL": redis_url}

    def models(*args: str) -> tuple[int, list[str]]:
        done = subprocess.run([sys.executable, "-m", "scripts.models", *args], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=180,
                              check=False)
        return done.returncode, done.stderr.splitlines()

    def add(target: str, *options: str) -> tuple[int, list[str]]:
        return models("add", "x", "--entry-point", target, "--path", str(tmp_path),
                      "--input", "image:3x16x16", "--no-export", *options)

    yield add
    assert json.loads(subprocess.run([sys.executable, "-m", "scripts.models", "list", "--json"],
                                     cwd=REPO, env=env, capture_output=True, check=True,
                                     timeout=60).stdout) == []


def _error(lines: list[str]) -> str:
    """The one error line (the rest of stderr is the user's and torch's own output)."""
    assert not any("Traceback" in line for line in lines), lines
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, lines
    return errors[0]


def test_a_factory_that_hangs_is_killed_at_the_timeout(run) -> None:
    status, lines = run("hangs:build", "--timeout", "3")
    assert status == 2 and "no model after 3 s" in _error(lines)
    for line in lines:
        if line.startswith("ready "):
            with pytest.raises(ProcessLookupError):
                os.kill(int(line.split()[1]), 0)


def test_a_factory_that_ends_its_process_is_a_failed_build(run) -> None:
    status, lines = run("quits:build")
    assert status == 2 and "exited with status 0 without handing back a model" in _error(lines)


def test_a_factory_that_raises_is_one_line(run) -> None:
    status, lines = run("raises:build")
    assert status == 2 and "ValueError: no such layer: conv9" in _error(lines)


def test_the_timeout_must_be_a_positive_number_of_seconds(run) -> None:
    status, lines = run("raises:build", "--timeout", "0")
    assert status == 2 and "--timeout" in lines[-1]
