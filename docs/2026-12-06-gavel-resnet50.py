"""The roofline against steps nobody designed it on (2026-12-06, late; issue #47).

    SCHEDTUNE_DATA=../shared/data python docs/2026-12-06-gavel-resnet50.py [ARTEFACT OP_COSTS]

Gavel's artefact measured ResNet-50 training (ImageNet, 224 x 224, with its data loader)
alone on one V100 and one K80 at batch 16-128 (`simulation_throughputs.json`, steps per
second, the ``null`` entry of scale 1). The committed time roofline prices the same
step from our traced operations, without a loader (ours are profiled on synthetic input),
so it should come out somewhat fast. ARTEFACT and OP_COSTS default to the committed ones;
an older pair (``git show REV:profiles/models/train-time.roofline.joblib`` and
``...:profiles/features/op_costs.csv``) scores that revision.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import joblib
import numpy as np
import pandas as pd

from estimator import roofline

ROOT = Path(__file__).resolve().parents[1]
GAVEL = Path(os.environ.get("SCHEDTUNE_DATA", "../shared/data")) / "gavel-osdi20"
TYPES = {"v100": "V100-16GB", "k80": "K80"}
OPS = ("op_conv_gflops", "op_mm_gflops", "op_conv_gb", "op_mm_gb", "op_other_gb", "op_kernels")


def measured() -> list[tuple[str, int, float]]:
    """(GPU type, batch, seconds per step) of ResNet-50 alone on one GPU."""
    throughputs = json.loads((GAVEL / "simulation_throughputs.json").read_text())
    rows = []
    for gavel_type, gpu in TYPES.items():
        for key, value in throughputs[gavel_type].items():
            name, scale = ast.literal_eval(key)
            if name.startswith("ResNet-50") and scale == 1 and value["null"] > 0:
                rows.append((gpu, int(name.split("batch size ")[1].rstrip(")")),
                             1.0 / value["null"]))
    return rows


def main(artefact: Path, op_costs: Path) -> None:
    model, ops = joblib.load(artefact), pd.read_csv(op_costs)
    ratios = []
    for gpu, batch, seconds in measured():
        op = ops[(ops.model == "resnet50") & (ops.task == "train") & (ops.batch == batch)].iloc[0]
        row = {**{c: op[c] for c in OPS}, "steps": 1.0, "samples": float(batch),
               "input_pipeline": 0.0, **roofline.gpu_columns(gpu), "unit_s": 1.0}
        predicted = float(model.predict(np.array([[row[c] for c in roofline.COLUMNS]]))[0])
        ratios.append(predicted / seconds)
        print(f"{gpu:<10} batch {batch:>3}: measured {seconds:.3f} s a step, predicted "
              f"{predicted:.3f}, ratio {ratios[-1]:.2f}")
    ratios = np.array(ratios)
    print(f"median ratio {np.median(ratios):.2f}, average error "
          f"{np.mean(np.abs(ratios - 1)) * 100:.1f} % over {len(ratios)} rows")


if __name__ == "__main__":
    args = [Path(a) for a in sys.argv[1:3]]
    main(*(args or [ROOT / "profiles/models/train-time.roofline.joblib",
                    ROOT / "profiles/features/op_costs.csv"]))
