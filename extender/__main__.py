"""`python -m extender`: serve with gunicorn on embedded defaults (no cluster, no Redis needed).

Without a reachable cluster the bind verb records reservations only.
"""

import os
import sys
from pathlib import Path

CONFIG = Path(__file__).resolve().parent / "web" / "gunicorn.conf.py"


def main() -> None:
    os.execvp(sys.executable, [sys.executable, "-m", "gunicorn", "-c", str(CONFIG),
                               "extender.web.app:create_app()", *sys.argv[1:]])


if __name__ == "__main__":
    main()
