"""Compute and cache features for registered models (explicit, offline step).

    schedtune features resnet50 vit_b_16
    schedtune features --all --tasks train --batches 8 16 32 64

Writes profiles/features/models.csv and sim_peaks.csv (upserted, so runs can be
split and repeated). Imports torch; never run on the request path.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path


from estimator import feature_table
from estimator.zoo import MODEL_NAMES

DEFAULT_BATCHES = {"train": (1, 8, 16, 32, 64, 128), "inference": (1, 8, 32, 128)}
log = logging.getLogger("features")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"registered names: {', '.join(MODEL_NAMES)}")
    parser.add_argument("--all", action="store_true", help="every registered model")
    parser.add_argument("--tasks", nargs="+", default=list(feature_table.TASKS),
                        choices=feature_table.TASKS)
    parser.add_argument("--batches", nargs="+", type=int,
                        help="batch sizes to simulate (default: per task, see DEFAULT_BATCHES)")
    parser.add_argument("--out", type=Path, default=feature_table.FEATURES_DIR)
    parser.add_argument("--json", action="store_true", help="print one JSON summary on stdout")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    names = list(MODEL_NAMES) if args.all else args.models
    unknown = sorted(set(names) - set(MODEL_NAMES))
    if not names or unknown:
        parser.error(f"unknown or no models {unknown}; registered: {', '.join(MODEL_NAMES)}")
    if args.batches and any(b < 1 or b > feature_table.MAX_BATCH for b in args.batches):
        parser.error(f"batches must be in 1..{feature_table.MAX_BATCH}")

    from estimator import features  # noqa: PLC0415  (torch: only when asked to compute)

    timings: dict[str, float] = {}
    for name in names:
        started = time.perf_counter()
        feature_table.upsert(args.out / feature_table.MODELS_FILE, ["model"],
                             [features.summarize(name)])
        for task in args.tasks:
            peaks = features.simulate_peaks(name, task, args.batches or DEFAULT_BATCHES[task])
            feature_table.upsert(args.out / feature_table.SIM_FILE,
                                 ["model", "task", "batch"], peaks)
        timings[name] = round(time.perf_counter() - started, 2)
        log.info("%s: cached in %.1f s", name, timings[name])
    if args.json:
        print(json.dumps({"models": names, "seconds": timings}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
