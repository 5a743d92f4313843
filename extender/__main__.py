"""`python -m extender` / `schedtune serve`: the extender under gunicorn, on embedded
defaults (no cluster, no Redis needed). Extra arguments go to gunicorn.

Without a reachable cluster the bind verb records reservations only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from extender.settings import Settings, SettingsError

CONFIG = Path(__file__).resolve().parent / "web" / "gunicorn.conf.py"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:  # checked here too: gunicorn would print its own traceback around the message
        Settings.from_env(os.environ)
    except SettingsError as exc:
        print(f"schedtune serve: {exc}", file=sys.stderr)
        return 2
    os.execvp(sys.executable, [sys.executable, "-m", "gunicorn", "-c", str(CONFIG),
                               "extender.web.app:create_app()", *args])
    return 0  # not reached: the process is gunicorn now


if __name__ == "__main__":
    sys.exit(main())
