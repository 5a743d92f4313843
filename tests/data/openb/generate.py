"""Writes openb-format traces for the replay (seeded, so the files are reproducible).

    python tests/data/openb/generate.py                       # the small trace the tests read
    python tests/data/openb/generate.py --production --out D  # 1213 GPU nodes, 6212 GPUs,
                                                              # 8152 pods (not committed)

Same columns as alibaba/clusterdata cluster-trace-gpu-v2023 (openb_node_list_gpu_node.csv,
openb_pod_list_default.csv), made-up values: no row of the public trace is copied. The
production-size node list follows the trace's published composition (GPU models and GPUs
per node); its pods are drawn like the small trace's, at the trace's size."""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SMALL_NODES = [("G2", 8, 6), ("T4", 2, 3), ("V100M32", 8, 1), ("V100M16", 4, 1), ("A10", 1, 2),
               ("P100", 2, 1), ("", 0, 2)]  # model, GPUs per node, nodes (the last: CPU only)
PRODUCTION_NODES = [("G2", 8, 549), ("T4", 2, 387), ("G3", 8, 39), ("P100", 2, 131),
                    ("V100M32", 8, 21), ("V100M16", 4, 28), ("T4", 4, 17), ("V100M16", 8, 8),
                    ("V100M32", 4, 9), ("V100M16", 1, 19), ("P100", 1, 3), ("A10", 1, 2)]


def write(out: Path, nodes: list[tuple[str, int, int]], pods: int, gap_s: int,
          longest_s: int, seed: int) -> None:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "openb_node_list_gpu_node.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        n = 0
        for model, gpus, count in nodes:
            for _ in range(count):
                writer.writerow([f"openb-node-{n:04d}", 96000, 786432, gpus, model])
                n += 1
    with (out / "openb_pod_list_default.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec",
                         "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"])
        t = 9_000_000
        for i in range(pods):
            t += rng.randint(0, gap_s)
            kind = rng.random()
            if kind < 0.08:
                gpus, milli = 0, 0
            elif kind < 0.55:
                gpus, milli = 1, rng.choice([100, 200, 250, 300, 500, 700, 900])
            elif kind < 0.85:
                gpus, milli = 1, 1000
            else:
                gpus, milli = rng.choice([2, 4, 8]), 1000
            spec = rng.choice(["", "", "", "", "V100M16|V100M32", "T4", "G2"]) if gpus else ""
            scheduled = t + rng.randint(0, 5)
            deleted = "" if rng.random() < 0.04 else scheduled + rng.randint(60, longest_s)
            writer.writerow([f"openb-pod-{i:04d}", rng.choice([4000, 8000, 16000]), 32768, gpus,
                             milli, spec or "nan", rng.choice(["LS", "BE", "Burstable"]),
                             "Succeeded" if deleted else "Running", t, deleted, scheduled])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--production", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    if args.production:
        write(args.out, PRODUCTION_NODES, 8152, 160, 6 * 3600, seed=2023)
    else:
        write(args.out, SMALL_NODES, 240, 40, 3600, seed=2023)


if __name__ == "__main__":
    main()
