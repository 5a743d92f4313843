"""Rebuild the trained artefacts in profiles/models from the data directory.

    python scripts/train.py                   # all four targets, ours + paper-rfr
    python scripts/train.py --target train-mem --no-stats

Each artefact gets a JSON beside it: feature columns, pads (held-out),
training-data hash, library versions, held-out error statistics.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from estimator import artefacts  # noqa: E402
from estimator.data import DEFAULT_DATA_DIR, TARGETS, load_target  # noqa: E402
from estimator.errors import EstimatorError  # noqa: E402
from estimator.regressors import BASELINE, CHOSEN  # noqa: E402
from estimator.training import artefact_name, fit  # noqa: E402

log = logging.getLogger("train")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=tuple(TARGETS), nargs="+", default=list(TARGETS))
    parser.add_argument("--design", nargs="+", default=[CHOSEN, BASELINE])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=artefacts.MODELS_DIR)
    parser.add_argument("--no-stats", action="store_true",
                        help="skip the held-out statistics in the metadata (faster)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    summary = {}
    for target in args.target:
        try:
            frame = load_target(target, args.data)
        except EstimatorError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for design in args.design:
            regressor, meta = fit(target, design, frame, with_stats=not args.no_stats)
            path = artefacts.save(artefact_name(target, design), regressor, meta, args.out)
            summary[path.stem] = {k: meta[k] for k in ("rows", "pad_seen", "pad_unseen_gpu")}
            log.info("%s: %d rows, pad %.3f seen / %.3f unseen GPU", path.name, meta["rows"],
                     meta["pad_seen"], meta["pad_unseen_gpu"])
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
