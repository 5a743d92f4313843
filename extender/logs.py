"""Structured (one JSON object per line) logs. Callers pass named fields, never objects:
no pod spec, env value or token ever reaches a log line.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None)))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3), "level": record.levelname,
            "logger": record.name, "msg": record.getMessage(),
        }  # fmt: skip
        entry.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
