"""Compute and cache features for registered models (explicit, offline step).

    schedtune features resnet50 vit_b_16
    schedtune features --all --tasks train --batches 8 16 32 64
    schedtune features --all --device-only      # refresh only the allocator replay columns
    schedtune features --all --op-costs         # only each step's operations (op_costs.csv)

Writes profiles/features/models.csv and sim_peaks.csv (upserted, so runs can be
split and repeated). --device-only recomputes the replayed device memory (caching
allocator and cuDNN workspaces, seconds per model) of the rows already cached and
keeps their MemTracker columns (a minute per DenseNet batch). --op-costs writes only
op_costs.csv: each step's FLOPs, bytes and kernels per class of operation (seconds per
batch), what the time model prices on each GPU type. Imports torch; never run on the
request path.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any


from estimator import feature_table
from estimator.errors import EstimatorError
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
    parser.add_argument("--device-only", action="store_true",
                        help="recompute only the device-memory columns of cached rows (an "
                             "error, exit 2, when none of the asked rows is cached)")
    parser.add_argument("--op-costs", action="store_true",
                        help="compute only each step's operations (op_costs.csv), for the "
                             "batches given or the default ones")
    parser.add_argument("--json", action="store_true", help="print one JSON summary on stdout")
    args = parser.parse_args(argv)
    if args.op_costs and args.device_only:
        parser.error("--op-costs and --device-only refresh different tables: give one")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    names = list(MODEL_NAMES) if args.all else args.models
    unknown = sorted(set(names) - set(MODEL_NAMES))
    if not names or unknown:
        parser.error(f"unknown or no models {unknown}; registered: {', '.join(MODEL_NAMES)}")
    if args.batches and any(b < 1 or b > feature_table.MAX_BATCH for b in args.batches):
        parser.error(f"batches must be in 1..{feature_table.MAX_BATCH}")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is not a directory")
    if args.device_only:
        sim_rows = feature_table.read_rows(args.out / feature_table.SIM_FILE)
        uncached = [n for n in names if not _cached(sim_rows, n, args.tasks, args.batches)]
        if uncached:
            parser.error(f"nothing to refresh: no cached {'/'.join(args.tasks)} rows for "
                         f"{', '.join(uncached)} in {args.out / feature_table.SIM_FILE}; "
                         f"compute them first: schedtune features {' '.join(uncached)}")

    from estimator.simulation import features  # noqa: PLC0415  (torch: only when asked to compute)

    try:
        return _compute(features, args, names)
    except EstimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _compute(features: Any, args: argparse.Namespace, names: list[str]) -> int:
    timings: dict[str, float] = {}
    if args.op_costs:
        from estimator.simulation.op_costs import op_costs  # noqa: PLC0415

        for name in names:
            started = time.perf_counter()
            feature_table.upsert(args.out / feature_table.OPS_FILE, ["model", "task", "batch"],
                                 [op_costs(name, task, batch) for task in args.tasks
                                  for batch in args.batches or DEFAULT_BATCHES[task]])
            timings[name] = round(time.perf_counter() - started, 2)
            log.info("%s: operations cached in %.1f s", name, timings[name])
        if args.json:
            print(json.dumps({"models": names, "seconds": timings}))
        return 0
    if args.device_only:
        for name in names:
            started = time.perf_counter()
            _refresh_device(features, args.out / feature_table.SIM_FILE, name, args.tasks,
                            args.batches)
            timings[name] = round(time.perf_counter() - started, 2)
            log.info("%s: device memory refreshed in %.1f s", name, timings[name])
        if args.json:
            print(json.dumps({"models": names, "seconds": timings}))
        return 0
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


def _refresh_device(features: Any, path: Path, name: str, tasks: list[str],
                    batches: list[int] | None) -> None:
    """Replace the device columns of `name`'s cached rows (those of `batches` only, when
    given); the other columns are kept as they are."""
    cached = _cached(feature_table.read_rows(path), name, tasks, batches)
    rows = []
    for task in tasks:
        wanted = sorted(b for t, b in cached if t == task)
        for device in features.simulate_device(name, task, wanted):
            row = {c: cached[(task, device.batch)][c]
                   for c in ("model", "task", "batch", *feature_table.SIM_COLUMNS)
                   if c in cached[(task, device.batch)]}
            rows.append({**row, **{c: getattr(device, c) for c in feature_table.DEVICE_COLUMNS}})
    feature_table.upsert(path, ["model", "task", "batch"], rows)


def _cached(rows: list[dict[str, str]], name: str, tasks: list[str],
            batches: list[int] | None) -> dict[tuple[str, int], dict[str, str]]:
    """`name`'s cached rows of `tasks` (and `batches`, when given), by (task, batch)."""
    return {(r["task"], int(r["batch"])): r for r in rows
            if r.get("model") == name and r.get("task") in tasks
            and str(r.get("batch")).isdigit() and (not batches or int(r["batch"]) in batches)}


if __name__ == "__main__":
    sys.exit(main())
