"""`schedtune data`: where the paper's reference data is read from, and fetching it.

    schedtune data where            # the directories looked up, in order, and which one is used
    schedtune data fetch            # the authors' artefact into the cache, checksums checked
    schedtune data fetch --into DIR --source URL

Tools read the data from --data, else $SCHEDTUNE_DATA, else ../shared/data beside the
checkout, else the cache (`estimator.reference.tables.find_data_dir`). `fetch` downloads the authors'
MIT-licensed files (`estimator.reference.fetch`), keeps each only when its SHA-256 is the one
committed, and rebuilds the reconstructed tables from the authors' forests.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from estimator.reference.tables import (
    DATA_ENV, PAPER_DIR, SHARED_DATA_DIR, cache_data_dir, find_data_dir,
)  # fmt: skip
from estimator.reference.fetch import ARTEFACT, fetch
from estimator.errors import EstimatorError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("where", help="the data directories looked up, in order")
    fetching = verbs.add_parser("fetch", help="download the authors' artefact, checksummed")
    fetching.add_argument("--into", type=Path, help=f"default: the cache ({cache_data_dir()})")
    fetching.add_argument("--source", default=ARTEFACT,
                          help="base URL of the artefact's files (default: its pinned commit)")
    return parser


def where() -> int:
    used = find_data_dir()
    rows = [("$" + DATA_ENV, Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else None),
            ("beside the checkout", SHARED_DATA_DIR), ("cache", cache_data_dir())]
    for label, path in rows:
        if path is None:
            print(f"  {label:<20} (not set)")
            continue
        held = "holds the paper's data" if (path / PAPER_DIR).is_dir() else "absent"
        print(f"{'*' if path == used else ' '} {label:<20} {path}  ({held})")
    if not (used / PAPER_DIR).is_dir():
        print("no data directory holds it: `schedtune data fetch` downloads it into the cache")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.verb == "where":
        return where()
    into = args.into or cache_data_dir()
    try:
        target = fetch(into, args.source)
    except (EstimatorError, OSError) as exc:
        print(f"schedtune data fetch: {exc}", file=sys.stderr)
        return 1
    print(f"the paper's reference data is in {target}")
    if into != find_data_dir():
        print(f"(tools read another directory first: pass --data {into} or set {DATA_ENV})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
