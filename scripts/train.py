"""Rebuild the trained artefacts in profiles/models from the data directory.

    schedtune train                   # all four targets, ours + paper-rfr
    schedtune train --target train-mem --no-stats
    schedtune train --with-observations   # refit with the runs the monitor observed

With --with-observations, the finished runs the monitor recorded (Redis stream
st:observations; REDIS_URL, --redis, else the embedded server) join the training rows:
successful runs those of the time targets, and the mean absolute error on those runs
is reported before (reference data only) and after (5-fold: each run predicted by a
refit without it); runs killed for memory those of the memory targets as censored rows
(the true peak was above the MiB they held: fitted as lower bounds, covered by every
pad), and the share of them a padded prediction would still under-reserve is reported
before and after (held out the same way). A target without usable runs is left as it
is.

Each artefact is written twice, as a scikit-learn pickle (.joblib, for evaluation) and in
plain numpy (.npz, the form the service loads: estimator/portable.py), with a JSON beside
it: feature columns, pads (held-out), training-data hash, library versions, held-out
error statistics.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path


from estimator.fitting import artefacts, own_fits
from estimator.reference.tables import (
    DATA_HELP, MEASUREMENTS_FILE, TARGETS, find_data_dir, load_target, measurements_option,
)
from estimator.errors import EstimatorError
from estimator.fitting.observations import (
    TIME_TARGETS, censored_gain, censored_rows, observation_rows, refit_gain, supersede,
)  # fmt: skip
from estimator.fitting.regressors import BASELINE, CHOSEN, DESIGNS
from estimator.fitting.training import artefact_name, fit

log = logging.getLogger("train")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=tuple(TARGETS), nargs="+", default=list(TARGETS))
    parser.add_argument("--design", nargs="+", default=[CHOSEN, BASELINE])
    parser.add_argument("--data", type=Path, help=DATA_HELP)
    parser.add_argument("--measurements", type=measurements_option, default=MEASUREMENTS_FILE,
                        metavar="CSV|none", help="profiled rows to add when the file exists "
                        "(default profiles/measurements.csv; none: the reference rows alone)")
    parser.add_argument("--out", type=Path, default=artefacts.MODELS_DIR)
    parser.add_argument("--no-stats", action="store_true",
                        help="skip the held-out statistics in the metadata (faster)")
    parser.add_argument("--with-observations", action="store_true",
                        help="refit with the runs the monitor observed (time: successful "
                             "runs; memory: runs killed for memory, as lower bounds)")
    parser.add_argument("--redis", help="Redis URL holding the observations")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.data = find_data_dir(args.data)
    unknown = sorted({d for t in args.target for d in args.design if d not in DESIGNS[t]})
    if unknown:
        parser.error(f"unknown designs {unknown}; known: "
                     f"{', '.join(sorted({d for t in args.target for d in DESIGNS[t]}))}")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is not a directory")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    observations = None
    if args.with_observations:
        try:
            observations = _read_observations(args.redis)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    summary = {}
    for target in args.target:
        extra = None
        if observations is not None:
            extra = (observation_rows(observations, target) if target in TIME_TARGETS
                     else censored_rows(observations, target))
        if extra is not None and extra.empty:
            log.info("%s: no usable observed runs; artefacts left as they are", target)
            continue
        try:
            frame = load_target(target, args.data, extra=extra, measurements=args.measurements)
        except EstimatorError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for design in args.design:
            if extra is not None and target in TIME_TARGETS:
                try:
                    gain = refit_gain(target, design, frame)
                except ValueError as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    return 1
                summary[f"{target}.{design}.observations"] = gain
                log.info("%s %s: %d observed runs, error on them %.1f %% before, %.1f %% after "
                         "(held out)", target, design, gain["observations"],
                         gain["before_mape_pct"], gain["after_mape_pct"])
            elif extra is not None:
                try:
                    gain = censored_gain(target, design, frame)
                except ValueError as exc:  # a fixed-pad design: fitted, but not reported
                    log.info("%s %s: %s", target, design, exc)
                else:
                    summary[f"{target}.{design}.observations"] = gain
                    log.info("%s %s: %d runs killed for memory, %.0f %% of them under-reserved "
                             "again before, %.0f %% after (held out)", target, design,
                             gain["killed_runs"], gain["still_killed_before_pct"],
                             gain["still_killed_after_pct"])
            fit_frame = supersede(frame) if extra is not None and target in TIME_TARGETS \
                else frame
            other = DESIGNS[target][design].fit_target
            try:
                other_rows = None if other is None else load_target(
                    other, args.data, measurements=args.measurements)
            except EstimatorError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            shared, cards = own_fits.split(fit_frame) if target in own_fits.TARGETS \
                else (fit_frame, {})
            stale = {p.stem for p in args.out.glob(f"{artefact_name(target, design)}.*.json")}
            for card, rows in [("", shared), *cards.items()]:
                regressor, meta = fit(target, design, rows, with_stats=not args.no_stats,
                                      fit_frame=other_rows,
                                      protocols=("lomo", "lofo") if card else
                                      ("lomo", "lofo", "logo"))
                name = f"{artefact_name(target, design)}.{card}" if card else \
                    artefact_name(target, design)
                stale.discard(name)
                path = artefacts.save(name, regressor, meta, args.out)
                summary[path.stem] = _summary(path.name, meta)
            for name in sorted(stale):  # a card no longer fitted on its own
                artefacts.remove(name, args.out)
                log.info("%s removed: its card has no profiled rows in this training "
                         "(the committed ones: --measurements profiles/measured/H200.csv)", name)
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def _summary(artefact: str, meta: dict) -> dict:
    """The pads of a fitted artefact, logged and returned for --json."""
    workspace = meta.get("pad_unseen_family_workspace")
    log.info("%s: %d rows (%d censored), pad %.3f seen / %.3f unseen GPU / %.3f + "
             "%.0f MiB unseen family%s", artefact, meta["rows"], meta["censored_rows"],
             meta["pad_seen"], meta["pad_unseen_gpu"], meta["pad_unseen_family"],
             meta.get("pad_unseen_family_mib", 0.0), "" if workspace is None else
             f" (or {workspace:.3f} + {meta['pad_unseen_family_workspace_mib']:.0f} MiB "
             "+ workspace range)")
    return {k: meta[k] for k in (
        "rows", "censored_rows", "pad_seen", "pad_unseen_gpu", "pad_unseen_family",
        "pad_unseen_family_mib", "pad_unseen_family_workspace",
        "pad_unseen_family_workspace_mib") if k in meta}


def _read_observations(url: str | None) -> list[dict[str, str]]:
    import os

    from extender.errors import StoreUnavailable
    from extender.settings import Settings
    from extender.state.embedded_redis import open_store

    settings = Settings.from_env({**os.environ, **({"REDIS_URL": url} if url else {})})
    try:
        return open_store(settings).observations()
    except StoreUnavailable as exc:
        raise RuntimeError(f"cannot read observations: {exc}") from exc


if __name__ == "__main__":
    sys.exit(main())
