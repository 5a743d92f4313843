"""A seen card's training time from the regression and the roofline together (2026-12-06,
night; issue #47). Tried in the service at `179e0d3` and `be2bd64`, reverted at `6e0b4e8`.

    SCHEDTUNE_DATA=../shared/data python docs/2026-12-06-time-blend.py [lomo] [lofo]

On the authors' training rows, one model out and one family out (each row held out once): the regression served then (design `log-linear` since 2026-12-07),
the roofline priced as the service prices a job (no input pipeline), their geometric mean
with equal weights ("blend"), and the regression's cross-card ratios at a level halfway to
the roofline's ("level": per job, the regression times the geometric mean over the five
cards of sqrt(roofline / regression)). Average and worst error, and how well each compares
cards for one job (mean |log| error of the predicted ratio between two cards; the share
of pairs off by more than 20 %), which is what a placement reads.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from estimator.fitting.evaluation import _outer_splits, held_out, matrix, metrics
from estimator.fitting.regressors import DESIGNS
from estimator.reference.tables import load_target

DATA = Path(os.environ.get("SCHEDTUNE_DATA", "../shared/data"))
KEY = ["model", "batch", "gpu"]


def roofline_without_pipeline(frame: pd.DataFrame, protocol: str) -> np.ndarray:
    """Held-out roofline times, fitted on the rows as they are (the authors' loader in
    them), priced with no input pipeline."""
    design = DESIGNS["train-time"]["roofline"]
    out = np.full(len(frame), np.nan)
    for fit_idx, test_idx in _outer_splits(frame, protocol):
        fit = frame.iloc[fit_idx]
        fit = fit[~fit["over_capacity"]]
        model = design.make().fit(matrix(fit, design), fit["y"].to_numpy(float))
        out[test_idx] = model.predict(matrix(frame.iloc[test_idx].assign(input_pipeline=0.0),
                                             design))
    return out


def card_ratio_error(rows: pd.DataFrame) -> tuple[float, float]:
    errors = []
    for _, job in rows.groupby(["model", "batch"]):
        job = job.set_index("gpu")
        for a, b in itertools.combinations(job.index, 2):
            predicted = job["predicted"][a] / job["predicted"][b]
            errors.append(abs(np.log(predicted / (job["y"][a] / job["y"][b]))))
    errors = np.array(errors)
    return float(errors.mean()), float((errors > np.log(1.2)).mean())


def main(protocols: list[str]) -> None:
    if set(protocols) - {"lomo", "lofo"}:
        sys.exit("protocols: lomo, lofo (each row held out once)")
    frame = load_target("train-time", DATA)
    for protocol in protocols:
        rows = held_out(DESIGNS["train-time"]["log-linear"], frame, protocol)
        hardware = frame[KEY].assign(hardware=roofline_without_pipeline(frame, protocol))
        rows = rows.merge(hardware, on=KEY)
        level = np.exp(0.5 * np.log(rows["hardware"] / rows["predicted"])
                       .groupby([rows["model"], rows["batch"]]).transform("mean"))
        forms = {"ours": rows["predicted"], "roofline": rows["hardware"],
                 "blend": np.sqrt(rows["predicted"] * rows["hardware"]),
                 "level": rows["predicted"] * level}
        for name, predicted in forms.items():
            scored = rows.assign(predicted=predicted, padded=predicted)
            m = metrics(scored)
            mean, share = card_ratio_error(scored)
            print(f"{protocol:<7} {name:<9} average {m['avg_err_pct']:5.1f} %, worst "
                  f"{m['max_err_pct']:5.1f} %, median ratio {m['ratio_median']:.2f}; cards "
                  f"compared: |log| error {mean:.3f}, {share:.0%} of pairs off > 20 %")


if __name__ == "__main__":
    main(sys.argv[1:] or ["lomo", "lofo"])
