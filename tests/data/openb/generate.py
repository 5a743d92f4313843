"""Writes the small openb-format trace the replay tests read (seeded, so the files are
reproducible): python tests/data/openb/generate.py. Same columns as alibaba/clusterdata
cluster-trace-gpu-v2023 (openb_node_list_gpu_node.csv, openb_pod_list_default.csv), made
up values: no row of the public trace is copied."""

from __future__ import annotations

import csv
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODES = [("G2", 8, 6), ("T4", 2, 3), ("V100M32", 8, 1), ("V100M16", 4, 1), ("A10", 1, 2),
         ("P100", 2, 1), ("", 0, 2)]  # model, GPUs per node, nodes (the last: CPU only)


def main() -> None:
    rng = random.Random(2023)
    with (HERE / "openb_node_list_gpu_node.csv").open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        n = 0
        for model, gpus, count in NODES:
            for _ in range(count):
                out.writerow([f"openb-node-{n:04d}", 96000, 786432, gpus, model])
                n += 1
    with (HERE / "openb_pod_list_default.csv").open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec",
                      "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"])
        t = 9_000_000
        for i in range(240):
            t += rng.randint(0, 40)
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
            deleted = "" if rng.random() < 0.04 else scheduled + rng.randint(60, 3600)
            out.writerow([f"openb-pod-{i:04d}", rng.choice([4000, 8000, 16000]), 32768, gpus,
                          milli, spec or "nan", rng.choice(["LS", "BE", "Burstable"]),
                          "Succeeded" if deleted else "Running", t, deleted, scheduled])


if __name__ == "__main__":
    main()
