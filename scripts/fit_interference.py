"""Fit the collocation slowdown from Gavel's measured pair throughputs and commit it.

    schedtune fit-interference [--data DIR]    # writes profiles/interference.json
    schedtune fit-interference --compare profiles/measured/H200-collocation.csv

Model: with k jobs on a GPU each runs at speed 1 / (1 + alpha (k - 1)). For every
measured pair, a job's shared/alone throughput ratio r gives alpha = 1/r - 1; the
fitted alpha is the one of the median ratio, per GPU (the reference data is Gavel's
measurement, read from the data directory and never copied here).

`--compare CSV` writes nothing: it reads collocated runs `schedtune profile --collocate`
measured and prints, per GPU and number of jobs, the measured speed and the alpha it
implies beside the committed model's speed.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from estimator.reference.tables import DATA_HELP, find_data_dir
from estimator.errors import EstimatorError
from estimator.transformer.config import read_json

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "profiles" / "interference.json"
GPUS = ("k80", "p100", "v100")
MAX_ALPHA = 100.0  # each of two jobs at 1 % of its speed alone: not a measurement


def fit(throughputs: Any) -> dict:
    """The fitted slowdown; `ValueError` names what in `throughputs` cannot be used."""
    if not isinstance(throughputs, dict):
        raise ValueError("expected a JSON object of GPU types")
    per_gpu = {}
    for gpu in GPUS:
        jobs = throughputs.get(gpu)
        if not isinstance(jobs, dict) or not jobs:
            raise ValueError(f"no {gpu!r} object of measured jobs")
        ratios = []
        for job, runs in jobs.items():
            if not isinstance(runs, dict):
                raise ValueError(f"{gpu} {job}: expected an object of throughputs")
            alone = _throughput(runs.get("null", 0.0), f"{gpu} {job} alone")
            for other, pair in runs.items():
                if other == "null":
                    continue
                if not isinstance(pair, list) or not pair:
                    raise ValueError(f"{gpu} {job} with {other}: expected a list of throughputs")
                shared = _throughput(pair[0], f"{gpu} {job} with {other}")
                if alone > 0 and shared > 0:
                    ratios.append(shared / alone)
        if not ratios:
            raise ValueError(f"{gpu}: no job measured with positive throughputs alone and "
                             "shared")
        median = statistics.median(ratios)
        alpha = 1 / median - 1 if median > 0 else math.inf
        if not 0 <= alpha <= MAX_ALPHA:
            raise ValueError(f"{gpu}: the median shared/alone ratio {median:.4g} gives alpha "
                             f"{alpha:.4g}, outside 0..{MAX_ALPHA:g}: the throughputs are not "
                             "measurements")
        per_gpu[gpu] = {"pairs": len(ratios), "median_ratio": round(median, 4),
                        "alpha": round(alpha, 4)}
    return {"model": "speed = 1 / (1 + alpha (k - 1))", "alpha": per_gpu["v100"]["alpha"],
            "alpha_from": "v100 pair medians (the data-centre GPU of the three)",
            "per_gpu": per_gpu, "source": "gavel-osdi20/simulation_throughputs.json (measured)"}


def _throughput(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: throughput must be a finite number >= 0, got {value!r:.40}")
    return float(value)


def compare(rows: list[dict[str, str]], alpha: float) -> dict:
    """Per GPU and k: the median measured speed (together over alone), the alpha it
    implies, and the speed the committed `alpha` plays forward."""
    groups: dict[tuple[str, int], list[float]] = {}
    for line, row in enumerate(rows, start=2):
        try:
            k, speed = int(row["k"]), float(row["speed"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"line {line}: needs a whole k and a speed ({exc})") from exc
        if not (2 <= k <= 64 and 0 < speed <= 10 and math.isfinite(speed)):
            raise ValueError(f"line {line}: k {k} / speed {speed} is not a collocated run")
        groups.setdefault((str(row.get("gpu", "?")), k), []).append(speed)
    if not groups:
        raise ValueError("no collocated runs in it")
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (gpu, k), speeds in sorted(groups.items()):
        median = statistics.median(speeds)
        out.setdefault(gpu, {})[str(k)] = {
            "jobs": len(speeds), "median_speed": round(median, 4),
            "alpha": round((1 / median - 1) / (k - 1), 4),
            "committed_speed": round(1 / (1 + alpha * (k - 1)), 4)}
    return {"committed_alpha": alpha, "per_gpu": out}


def _compare(path: Path) -> int:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        committed = float(json.loads(OUT.read_text())["alpha"])
        print(json.dumps(compare(rows, committed), indent=2))
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, ValueError) as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help=DATA_HELP)
    parser.add_argument("--out", type=Path, help=f"default profiles/{OUT.name}")
    parser.add_argument("--compare", type=Path, metavar="CSV",
                        help="print measured collocation against the committed alpha")
    args = parser.parse_args(argv)
    if args.compare is not None:
        if args.data is not None or args.out is not None:
            parser.error("--compare writes nothing and reads no --data: it compares the CSV "
                         f"with {OUT.name}")
        return _compare(args.compare)
    args.data, args.out = find_data_dir(args.data), args.out or OUT
    path = args.data / "gavel-osdi20" / "simulation_throughputs.json"
    if not path.is_file():
        print(f"error: {path} is missing; pass --data DIR holding gavel-osdi20/", file=sys.stderr)
        return 1
    if args.out.is_dir() or not args.out.parent.is_dir():
        print(f"error: --out {args.out} must be a file in an existing directory",
              file=sys.stderr)
        return 1
    try:
        result = fit(read_json(path))
    except EstimatorError as exc:  # read_json's message names the file
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=2) + "\n"
    try:
        args.out.write_text(text)
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 1
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
