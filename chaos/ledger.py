"""The chaos run's bookkeeping: counters by scope, latency peaks, samples of bad answers,
and the threads that died (each death fails the run). No processes, no HTTP."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable


class Ledger:
    """Counters by scope, latency peaks, samples and dead threads; shared by every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.peaks: dict[str, float] = {}
        self.samples: dict[str, list[str]] = defaultdict(list)
        self.deaths: list[str] = []

    def add(self, scope: str, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[scope][key] += n

    def peak(self, key: str, value: float) -> None:
        with self._lock:
            self.peaks[key] = max(self.peaks.get(key, 0.0), value)

    def sample(self, scope: str, text: str) -> None:
        with self._lock:
            if len(self.samples[scope]) < 5:
                self.samples[scope].append(text[:300])

    def thread(self, name: str, target: Callable[[], None]) -> threading.Thread:
        """A thread whose unexpected exception is recorded (and fails the run), not lost."""

        def guarded() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001  (every death must fail the run)
                with self._lock:
                    self.deaths.append(f"{name}: {type(exc).__name__}: {exc}"[:500])

        return threading.Thread(target=guarded, name=name, daemon=True)

    def run(self, threads: list[threading.Thread]) -> None:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
