"""Processes of the tier, each in its own process group with its own log file, stopped by
PID (SIGTERM, then SIGKILL of the group) however the test run ends."""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

STOP_GRACE_S = 5.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    """In the child, before exec: the kernel SIGKILLs it when the test run's process dies,
    however that dies (atexit and fixtures do not run on a SIGKILL)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class NotReady(RuntimeError):
    """A process exited or did not become ready in time (its log's tail says why)."""


@dataclass
class Process:
    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen | None = None
    lives: int = 0

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class Supervisor:
    """Starts, kills and stops the tier's processes; every log stays in `log_dir`."""

    log_dir: Path
    processes: dict[str, Process] = field(default_factory=dict)
    others: list[Callable[[], None]] = field(default_factory=list)  # stops of the rest

    def __post_init__(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop_all)  # also when the session is interrupted

    def start(self, name: str, command: Sequence[str], env: dict[str, str] | None = None,
              ready: Callable[[], bool] | None = None, timeout_s: float = 60.0,
              cwd: Path | None = None) -> Process:
        proc = self.processes.get(name) or Process(name, [], {}, self.log_dir / f"{name}.log")
        proc.command, proc.env = list(command), dict(env or os.environ)
        self.processes[name] = proc
        proc.lives += 1
        with proc.log.open("ab") as out:
            out.write(f"\n===== life {proc.lives}: {' '.join(proc.command)}\n".encode())
            out.flush()
            proc.popen = subprocess.Popen(proc.command, env=proc.env, cwd=cwd,
                                          stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          preexec_fn=_die_with_parent)
        if ready is not None:
            self.wait_ready(proc, ready, timeout_s)
        return proc

    def restart(self, name: str, ready: Callable[[], bool] | None = None,
                timeout_s: float = 60.0) -> Process:
        proc = self.processes[name]
        return self.start(name, proc.command, proc.env, ready, timeout_s)

    @staticmethod
    def wait_ready(proc: Process, ready: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if not proc.running:
                raise NotReady(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")
            try:
                if ready():
                    return
            except Exception:  # noqa: BLE001  (not answering yet)
                pass
            if time.monotonic() > deadline:
                raise NotReady(f"{proc.name} not ready after {timeout_s:.0f} s:\n{proc.tail()}")
            time.sleep(0.05)

    def kill(self, name: str) -> None:
        """SIGKILL the whole process group at once, as when a container dies."""
        proc = self.processes[name]
        if proc.popen is None:
            return
        try:
            os.killpg(proc.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.popen.wait()

    def stop(self, name: str) -> None:
        proc = self.processes[name]
        if proc.popen is None or proc.popen.poll() is not None:
            return
        try:
            os.killpg(proc.popen.pid, signal.SIGTERM)
            proc.popen.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.kill(name)
        except ProcessLookupError:
            pass
        self.kill(name)  # what the group leader left behind (gunicorn's workers)

    def on_stop(self, stop: Callable[[], None]) -> None:
        """`stop` is called by `stop_all`, after the processes started here are stopped."""
        self.others.append(stop)

    def stop_all(self) -> None:
        for name in reversed(list(self.processes)):
            self.stop(name)
        while self.others:
            self.others.pop()()
