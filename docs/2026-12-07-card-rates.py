"""A seen card's training time from its own rates (2026-12-07; issue #47): the figures of
2026-12-07-card-rates.md that `schedtune evaluate` does not print.

    SCHEDTUNE_DATA=../shared/data python docs/2026-12-07-card-rates.py [REPORTS_DIR [NEW OLD]]

1. One model out and one family out on the authors' rows: average and worst error, and how
   well each design compares two cards for one job (the blend experiment's measure).
2. Gavel's ResNet-50 training steps (V100, K80), priced through the service as committed
   (`Estimator.load`), per step.
3. With REPORTS_DIR [NEW OLD]: the paired comparison of two sets of `schedtune replay
   --json` reports, ``{NEW,OLD}_{lomo,lofo}.json`` (``--orders N``) and
   ``..._{world}_{order}.json`` (single ``--shuffle`` runs), order by order (default
   names: card-rates, log-linear).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np

from estimator import card_rates
from estimator.fitting.evaluation import held_out, metrics
from estimator.fitting.regressors import DESIGNS
from estimator.predict import Estimator
from estimator.reference.tables import load_target

DATA = Path(os.environ.get("SCHEDTUNE_DATA", "../shared/data"))
HERE = Path(__file__).resolve().parent


def _sibling(name: str):
    """An earlier experiment's script, for its measure (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def accuracy() -> None:
    compare = _sibling("2026-12-06-time-blend").card_ratio_error
    frame = load_target("train-time", DATA, measurements="none")
    for protocol in ("lomo", "lofo"):
        for design in ("ours", "log-linear"):
            rows = held_out(DESIGNS["train-time"][design], frame, protocol)
            m = metrics(rows)
            mean, share = compare(rows)
            print(f"{protocol} {design:<10} average {m['avg_err_pct']:.1f} %, worst "
                  f"{m['max_err_pct']:.1f} %; cards compared: |log| error {mean:.3f}, "
                  f"{share:.0%} of pairs off > 20 %")


def gavel() -> None:
    measured = _sibling("2026-12-06-gavel-resnet50").measured()
    served = Estimator.load()
    ratios = np.array([
        served._per_unit("resnet50", "train", batch)[gpu].unit_s
        / card_rates.epoch_steps(batch) / seconds for gpu, batch, seconds in measured])
    print(f"Gavel's ResNet-50 steps, served: median ratio {np.median(ratios):.2f}, average "
          f"error {np.mean(np.abs(ratios - 1)) * 100:.1f} % over {len(ratios)} rows")


def _per_order(directory: Path, design: str, world: str) -> dict[int, tuple[float, float]]:
    out = {}
    many = directory / f"{design}_{world}.json"
    if many.exists():
        for run in json.loads(many.read_text())["per_order"]:
            ours = run["policies"]["ours"]
            out[run["order"]] = (ours["makespan_s"], ours["avg_jct_s"])
    for one in directory.glob(f"{design}_{world}_*.json"):
        ours = json.loads(one.read_text())["policies"]["ours"]
        out[int(one.stem.rsplit("_", 1)[1])] = (ours["makespan_s"], ours["avg_jct_s"])
    return out


def paired(directory: Path, new_name: str = "card-rates", old_name: str = "log-linear") -> None:
    rng = np.random.default_rng(0)
    for world in ("lomo", "lofo"):
        new, old = (_per_order(directory, d, world) for d in (new_name, old_name))
        orders = sorted(set(new) & set(old))
        if not orders:
            continue
        a, b = np.array([new[o] for o in orders]), np.array([old[o] for o in orders])
        for column, figure in enumerate(("makespan", "average JCT")):
            change = (a[:, column] / b[:, column] - 1) * 100
            means = [rng.choice(change, len(change)).mean() for _ in range(10_000)]
            print(f"{world} {figure}, {len(orders)} orders: {new_name} median "
                  f"{np.median(a[:, column]):,.0f}, {old_name} {np.median(b[:, column]):,.0f}; "
                  f"paired mean change {change.mean():+.1f} % (90 % bootstrap "
                  f"{np.percentile(means, 5):+.1f} to {np.percentile(means, 95):+.1f}), "
                  f"lower on {int((change < 0).sum())} of {len(orders)}")


if __name__ == "__main__":
    accuracy()
    gavel()
    if len(sys.argv) > 1:
        paired(Path(sys.argv[1]), *sys.argv[2:4])
