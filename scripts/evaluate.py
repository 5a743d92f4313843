"""Held-out accuracy of every estimator design, side by side in one run.

    schedtune evaluate --protocol lomo
    schedtune evaluate --protocol lofo            # leave one architecture family out
    schedtune evaluate --protocol logo-calibrated --target train-mem --json
    schedtune evaluate --parts                    # what each simulated part explains, per family
    schedtune evaluate --protocol logo --gpu H200 # scored on one GPU type's rows only
    schedtune evaluate --service profiles/measured/H200.csv   # the committed artefacts

Protocols: random (80/20 x 10 seeds), lomo (leave one model out), lofo (leave
one family out: ResNet, DenseNet, VGG in the authors' rows), logo (leave one GPU
type out), logo-calibrated (logo plus one profiled job on the held-out GPU). The
pad E of each fold comes from the same scheme inside its training rows. Every
design is also reported per family of the held-out rows. Reads the reference data
from --data (`estimator.reference.tables.find_data_dir`) and the cached features from
profiles/features.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


import pandas as pd

from estimator.reference.tables import (
    DATA_HELP, MEASUREMENTS_FILE, TARGETS, find_data_dir, load_target,
    measurements_option, read_measurements,
)
from estimator.errors import EstimatorError
from estimator.fitting.own_fits import TARGETS as OWN_FIT_TARGETS
from estimator.fitting.evaluation import (
    ANCHORS, PROTOCOLS, evaluate_by_family, residual_parts, score_service,
)  # fmt: skip
from estimator.predict import HARDWARE_DESIGN, Estimator
from estimator.fitting.regressors import BASELINE, CHOSEN, DESIGNS

COLUMNS = ("rmse", "rmsle", "avg_err_pct", "max_err_pct", "under_alloc_pct", "over_alloc_pct")
#: Time is never padded: predicted over actual replaces the allocation columns.
TIME_COLUMNS = ("rmse", "avg_err_pct", "max_err_pct", "ratio_median", "ratio_p10", "ratio_p90")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol", choices=PROTOCOLS, default="lomo")
    parser.add_argument("--target", choices=tuple(TARGETS), default="train-mem")
    parser.add_argument("--data", type=Path, help=DATA_HELP)
    parser.add_argument("--measurements", type=measurements_option, default=MEASUREMENTS_FILE,
                        metavar="CSV|none", help="profiled rows to add when the file exists "
                        "(default profiles/measurements.csv; none: the reference rows alone)")
    parser.add_argument("--jobs", type=_positive, default=2, help="parallel folds (default 2)")
    parser.add_argument("--designs", nargs="+", help="only these designs (default: all)")
    parser.add_argument("--service", type=Path, metavar="CSV",
                        help="score the committed artefacts, padded as the service pads, "
                        "against these profiled rows (nothing is fitted)")
    parser.add_argument("--gpu", help="score only the held-out rows on this GPU type "
                        "(folds fit as usual), e.g. H200 for its profiled rows")
    parser.add_argument("--parts", action="store_true",
                        help="report how much of the residual each simulated part removes "
                             "(memory targets only), instead of the designs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.data = find_data_dir(args.data)
    if args.parts and not args.target.endswith("-mem"):
        parser.error(f"--parts explains memory targets only, not {args.target}")

    if args.service is not None:
        if args.gpu or args.parts or args.designs or argv_names(argv, "--protocol", "--target",
                                                                 "--measurements"):
            parser.error("--service scores the committed artefacts on its CSV's rows: it takes "
                         "no --gpu, --parts, --designs, --protocol, --target or --measurements")
        return _score_service(args.service, args.json)
    if args.parts and args.gpu:
        parser.error("--parts explains every row; it takes no --gpu")
    started = time.perf_counter()
    try:
        frame = load_target(args.target, args.data, measurements=args.measurements)
    except EstimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.parts:
        parts = residual_parts(frame)
        print(json.dumps({"target": args.target, "parts": parts}, indent=2) if args.json
              else render_parts(parts))
        return 0
    designs = DESIGNS[args.target]
    unknown = sorted(set(args.designs or ()) - set(designs))
    if unknown:
        parser.error(f"unknown designs {unknown}; known: {', '.join(designs)}")
    if args.designs:
        designs = {n: designs[n] for n in args.designs}
    if args.gpu is not None and args.gpu not in set(frame["gpu"]):
        parser.error(f"no {args.target} rows on GPU {args.gpu!r}; the data has "
                     f"{', '.join(sorted(frame['gpu'].unique()))}")
    print(f"evaluating {len(designs)} designs on {len(frame)} {args.target} rows, "
          f"{args.protocol} held out ({args.jobs} processes)", file=sys.stderr, flush=True)
    try:
        fit_frames = {t: load_target(t, args.data, measurements=args.measurements)
                      for t in {d.fit_target for d in designs.values() if d.fit_target}}
    except EstimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    results = evaluate_by_family(designs, frame, args.protocol, n_jobs=args.jobs, gpu=args.gpu,
                                 progress=lambda line: print(f"  {line}", file=sys.stderr,
                                                             flush=True),
                                 fit_frames=fit_frames, own_fits=args.target in OWN_FIT_TARGETS)
    scored = frame if args.gpu is None else frame[frame["gpu"] == args.gpu]
    report = {
        "protocol": args.protocol,
        "target": args.target,
        "gpu": args.gpu,
        "chosen": _served(args.target, args.protocol, results),
        "baseline": BASELINE if BASELINE in results else next(iter(results)),
        "estimators": {name: by["all"] for name, by in results.items()},
        "by_family": {name: {f: m for f, m in by.items() if f != "all"}
                      for name, by in results.items()},
        # What the scored rows are: the H200's alone are measured, whatever the target.
        "reconstructed_data": bool((scored["source"] == "reconstructed").any()),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


def _served(target: str, protocol: str, results: dict) -> str:
    """The design the service would price the held-out rows with (marked ``*``): the
    committed one, but a time on a GPU type its artefacts never saw (`logo`) or saw in one
    calibration job (`logo-calibrated`) comes from the hardware (`estimator.predict`)."""
    if target.endswith("-time") and protocol.startswith("logo") and HARDWARE_DESIGN in results:
        return HARDWARE_DESIGN
    return CHOSEN if CHOSEN in results else next(iter(results))


def argv_names(argv: list[str] | None, *names: str) -> bool:
    """Whether any of these options was given (argparse fills in their defaults)."""
    given = sys.argv[1:] if argv is None else argv
    return any(a == n or a.startswith(n + "=") for a in given for n in names)


def _score_service(path: Path, as_json: bool) -> int:
    try:
        if not path.is_file():
            raise EstimatorError(f"{path} is not a file")
        read_measurements("train-mem", path)  # checks every row, whatever its task
        report = score_service(Estimator.load(), pd.read_csv(path))
    except EstimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"committed artefacts, padded as the service pads, against {path}:")
    for task, m in report.items():
        print(f"  {task:<9} {m['rows']} rows: memory {m['mem_avg_err_pct']:.1f} % avg / "
              f"{m['mem_max_err_pct']:.1f} % max error, {m['under_alloc']} under-allocated "
              f"(worst {m['worst_under_pct']:.1f} %), over-allocation {m['over_alloc_pct']:.1f} "
              f"%; time predicted / measured median {m['time_ratio_median']:.2f} "
              f"[p10 {m['time_ratio_p10']:.2f}, p90 {m['time_ratio_p90']:.2f}]")
    return 0


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def render(report: dict) -> str:
    columns = TIME_COLUMNS if report["target"].endswith("-time") else COLUMNS
    head = f"{'estimator':<22}" + "".join(f"{c:>17}" for c in columns)
    lines = [
        f"target {report['target']}, protocol {report['protocol']}"
        + (f", scored on {report['gpu']} rows only" if report.get("gpu") else "")
        + (" (RECONSTRUCTED data: the authors' forests' outputs, not measurements)"
           if report["reconstructed_data"] else " (measured data)"),
        head, "-" * len(head),
    ]  # fmt: skip
    for name, m in report["estimators"].items():
        mark = " *" if name == report["chosen"] else ""
        lines.append(f"{name + mark:<22}" + "".join(f"{m[c]:>17.3f}" for c in columns))
    chosen, base = report["estimators"][report["chosen"]], report["estimators"][report["baseline"]]
    lines.append(
        f"chosen/baseline average error: {chosen['avg_err_pct'] / base['avg_err_pct']:.2f}x; "
        f"{report['seconds']} s"
    )
    lines.append("per family of the held-out rows (avg % / max % error, under-allocated %, "
                 "over-allocation %):")
    for name, by in report["by_family"].items():
        lines.append(f"  {name:<22}" + "  ".join(
            f"{family} {m['avg_err_pct']:.1f}/{m['max_err_pct']:.1f}/{m['under_alloc_pct']:.1f}"
            f"/{m['over_alloc_pct']:.1f}" for family, m in by.items()))
    if "oom_detected_pct" in chosen:
        lines.append("over-capacity rows flagged as not fitting: " + ", ".join(
            f"{n} {m['oom_detected_pct']:.0f} %" for n, m in report["estimators"].items()))
    return "\n".join(lines)


def render_parts(parts: dict) -> str:
    """Mean |residual| per family after each anchor (MiB and % of the measured peak)."""
    lines = ["mean |residual| after anchor + per-GPU constant (constant from the other "
             "families), MiB (% of peak); share of the first residual each part removed"]
    lines.append(f"{'anchor':<46}" + "".join(f"{f:>22}" for f in parts))
    for i, (column, label) in enumerate(ANCHORS):
        cells = []
        for by in parts.values():
            cell = f"{by['mean_abs_left_mib'][column]:.0f} ({by['mean_abs_left_pct'][column]:.1f} %)"
            if i:
                cell += f" -{by['removed_share_pct'][column]:.0f}%"
            cells.append(f"{cell:>22}")
        lines.append(f"{label:<46}" + "".join(cells))
    lines.append("per-GPU constant (CUDA context and libraries), MiB: " + ", ".join(
        f"{g} {v:.0f}" for g, v in parts["all"]["gpu_constant_mib"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
