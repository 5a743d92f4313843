"""`schedtune`: a mistyped command gets the nearest one's name; Ctrl-C in any command is one
line and exit status 130, and leaves no model build running behind it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import cli

REPO = Path(__file__).resolve().parents[2]
HANGS = '''
import os
import sys
import time


def build():
    print("ready", os.getpid(), file=sys.stderr, flush=True)
    time.sleep(1000)
'''


@pytest.mark.parametrize("typed, meant", [("serv", "serve"), ("queue", "queues"),
                                          ("model", "models"), ("chaoss", "chaos")])
def test_a_mistyped_command_names_the_nearest(typed, meant, capsys) -> None:
    assert cli.main([typed]) == 2
    assert f"unknown command {typed!r}; did you mean {meant!r}?" in capsys.readouterr().err


def test_a_command_like_none_gets_no_guess(capsys) -> None:
    assert cli.main(["xyzzy"]) == 2
    assert "did you mean" not in capsys.readouterr().err


def _as_a_terminal_starts_it() -> None:
    """SIGINT at its default and unblocked, as a shell starts a foreground job. A child
    inherits both from its parent: started with them ignored or blocked (a pytest worker
    sometimes has them so), the CLI never sees the Ctrl-C and ends at --timeout instead,
    status 2 ("no model after 120 s")."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def test_ctrl_c_is_one_line_and_status_130_and_ends_the_build(redis_url, redis_client,
                                                              tmp_path) -> None:
    (tmp_path / "hangs.py").write_text(HANGS)
    cli_process = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "models", "add", "x", "--entry-point",
         "hangs:build", "--path", str(tmp_path), "--no-export", "--timeout", "120"],
        cwd=REPO, env={**os.environ, "REDIS_URL": redis_url}, stderr=subprocess.PIPE,
        text=True, start_new_session=True,  # its own process group, as a terminal's job
        preexec_fn=_as_a_terminal_starts_it)
    try:
        lines = iter(cli_process.stderr.readline, "")
        ready = next((line for line in lines if line.startswith("ready ")), "")
        assert ready, "the factory never ran"
        os.killpg(cli_process.pid, signal.SIGINT)  # Ctrl-C: the terminal's foreground group
        err = cli_process.stderr.read()
        assert cli_process.wait(timeout=60) == 130, err  # its stderr when it is not
    finally:
        if cli_process.poll() is None:
            cli_process.kill()
    assert "Traceback" not in err and "schedtune models: interrupted" in err
    with pytest.raises(ProcessLookupError):
        os.kill(int(ready.split()[1]), 0)  # the build's process is gone, not orphaned


def test_queues_without_a_store_says_where_it_looked_and_what_provides_one(
        monkeypatch, tmp_path, capsys) -> None:
    from scripts import queues

    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("EXTENDER_STATE_DIR", str(tmp_path))  # no embedded server running
    assert queues.main([]) == 1
    error, hint = capsys.readouterr().err.strip().splitlines()
    assert error.startswith("error: state store unreachable")
    assert str(tmp_path) in hint and "schedtune serve" in hint and "REDIS_URL" in hint
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1")
    assert queues.main([]) == 1
    assert "redis://127.0.0.1:1 did not answer" in capsys.readouterr().err
