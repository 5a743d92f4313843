"""Fit the collocation slowdown from Gavel's measured pair throughputs and commit it.

    schedtune fit-interference [--data DIR]    # writes profiles/interference.json

Model: with k jobs on a GPU each runs at speed 1 / (1 + alpha (k - 1)). For every
measured pair, a job's shared/alone throughput ratio r gives alpha = 1/r - 1; the
fitted alpha is the one of the median ratio, per GPU (the reference data is Gavel's
measurement, read from the data directory and never copied here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from estimator.data import DEFAULT_DATA_DIR

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "profiles" / "interference.json"
GPUS = ("k80", "p100", "v100")


def fit(throughputs: dict) -> dict:
    per_gpu = {}
    for gpu in GPUS:
        ratios = [pair[0] / alone
                  for runs in throughputs[gpu].values() if (alone := runs.get("null"))
                  for other, pair in runs.items() if other != "null" and pair[0] > 0]  # fmt: skip
        median = statistics.median(ratios)
        per_gpu[gpu] = {"pairs": len(ratios), "median_ratio": round(median, 4),
                        "alpha": round(1 / median - 1, 4)}
    return {"model": "speed = 1 / (1 + alpha (k - 1))", "alpha": per_gpu["v100"]["alpha"],
            "alpha_from": "v100 pair medians (the data-centre GPU of the three)",
            "per_gpu": per_gpu, "source": "gavel-osdi20/simulation_throughputs.json (measured)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    path = args.data / "gavel-osdi20" / "simulation_throughputs.json"
    if not path.is_file():
        print(f"error: {path} is missing; pass --data DIR holding gavel-osdi20/", file=sys.stderr)
        return 1
    result = fit(json.loads(path.read_text()))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
