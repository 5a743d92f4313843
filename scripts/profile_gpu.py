"""Profile jobs on a real NVIDIA GPU and record measured rows (the paper's method, IV-B).

    schedtune profile resnet50 --task train --batch 8 16 32 64
    schedtune profile bert_base --task inference --batch 1 --requests 1000
    schedtune profile --all-models --task train inference --batch 8 16 32 64 --steps 10
    schedtune profile --collocate resnet50:train:32 vgg16:train:32 --window 4

Peak memory is sampled with `nvidia-smi` above what the GPU used before the job's process
touched CUDA (the context counts, as in the paper's footnote 1), beside
`torch.cuda.max_memory_reserved`. Training times one epoch of `--samples` random inputs
(CIFAR-10's 50,000 images at 224x224 by default, as the paper resized them; no dataset is
read), or `--steps` steps of it scaled to the epoch; inference times `--requests` forward
passes of one batch. Each model runs in a process of its own; rows are
upserted per (model, task, batch, gpu) into profiles/measurements.csv with the GPU's
characteristics, and `schedtune train` fits on them beside the reference data.

`--collocate` runs each job alone, then all at once (one process each), prints every
job's speed together over alone (the interference `profiles/interference.json` models)
and upserts the rows into profiles/collocation.csv.
The libraries are `estimator.profiling.jobs` and `estimator.profiling.collocation`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from estimator.errors import EstimatorError
from estimator.feature_table import TASKS, check_job
from estimator.profiling.collocation import collocate, parse_job, record_collocation
from estimator.profiling.jobs import CIFAR10_TRAIN_IMAGES, ProfileError, profile, query_gpu, record
from estimator.reference.tables import COLLOCATION_FILE, MEASUREMENTS_FILE
from estimator.zoo import MODEL_NAMES, PAPER_MODELS, get_spec


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"registered names: {', '.join(MODEL_NAMES)}")
    parser.add_argument("--all-paper-models", action="store_true", help="the paper's 12 CNNs")
    parser.add_argument("--all-models", action="store_true", help="every registered model")
    parser.add_argument("--task", nargs="+", choices=TASKS, default=["train"])
    parser.add_argument("--batch", nargs="+", type=int, default=[32])
    parser.add_argument("--samples", type=int, default=CIFAR10_TRAIN_IMAGES,
                        help="training: samples per epoch (default CIFAR-10's 50,000)")
    parser.add_argument("--requests", type=int, default=1000, help="inference: requests to time")
    parser.add_argument("--steps", type=int, help="training: time only this many steps "
                        "(after a warm-up) and scale to the epoch")
    parser.add_argument("--deadline-s", type=float, help="start no model after this many "
                        "seconds (what was measured is kept)")
    parser.add_argument("--collocate", nargs="+", metavar="MODEL:TASK:BATCH",
                        help="measure these jobs' speed together over alone")
    parser.add_argument("--window", type=float, default=4.0,
                        help="--collocate: seconds each rate is measured over")
    parser.add_argument("--collocation-out", type=Path, default=COLLOCATION_FILE,
                        help="--collocate: where its rows are upserted")
    parser.add_argument("--gpu", type=int, default=0, help="nvidia-smi index of the GPU")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS_FILE)
    parser.add_argument("--json", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _arguments()
    args = parser.parse_args(argv)
    if args.collocate:
        if args.models or args.all_models or args.all_paper_models:
            parser.error("--collocate names its jobs as MODEL:TASK:BATCH; no other models")
        return _collocate(parser, args)
    if sum(map(bool, (args.models, args.all_models, args.all_paper_models))) > 1:
        parser.error("name models, or --all-paper-models, or --all-models: one of them")
    if args.steps is not None and "train" not in args.task:
        parser.error("--steps times training steps; inference times --requests")
    models = (list(MODEL_NAMES) if args.all_models else
              list(PAPER_MODELS) if args.all_paper_models else args.models)
    if not models:
        parser.error("name at least one model, --all-paper-models or --all-models")
    if min(args.samples, args.requests, 1 if args.steps is None else args.steps) < 1:
        parser.error("--samples, --requests and --steps must be positive")
    if args.deadline_s is not None and not 0 <= args.deadline_s <= 86_400:
        parser.error("--deadline-s must be 0..86400 seconds")
    try:
        for model in models:
            get_spec(model)
        jobs = [(task, batch) for task in args.task for batch in args.batch]
        for task, batch in jobs:
            check_job(task, batch)
    except (KeyError, ValueError) as exc:
        parser.error(exc.args[0] if exc.args else str(exc))
    if len(models) > 1:
        return _each_model_apart(models, args)
    return _profile(models[0], jobs, args)


def _profile(model: str, jobs: list[tuple[str, int]], args: argparse.Namespace) -> int:
    try:
        for m in profile(model, jobs, args.gpu, args.samples, args.requests, args.steps):
            record([m], args.out)
            print(json.dumps(asdict(m)) if args.json else
                  f"{model} {m.task} b{m.batch} on {m.gpu}: peak {m.peak_mib:.0f} MiB (torch "
                  f"reserved {m.torch_reserved_mib:.0f}, context {m.context_mib:.0f}), "
                  f"{m.seconds:.4g} s {'per epoch' if m.task == 'train' else 'per request'}",
                  flush=True)
    except (ProfileError, EstimatorError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _each_model_apart(models: list[str], args: argparse.Namespace) -> int:
    """One process per model: each starts with a fresh CUDA context and an empty cache."""
    shared = ["--task", *args.task, "--batch", *map(str, args.batch),
              "--samples", str(args.samples), "--requests", str(args.requests),
              "--gpu", str(args.gpu), "--out", str(args.out)]
    shared += (["--steps", str(args.steps)] if args.steps else []) + (["--json"] * args.json)
    started, failed = time.monotonic(), 0
    for n, model in enumerate(models):
        if args.deadline_s is not None and time.monotonic() - started > args.deadline_s:
            print(f"deadline: {len(models) - n} models not profiled: {models[n:]}",
                  file=sys.stderr)
            return 2
        child = [sys.executable, "-m", "scripts.profile_gpu", model, *shared]
        failed += subprocess.run(child, check=False).returncode != 0
    return 2 if failed else 0


def _collocate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not 0.1 <= args.window <= 600:
        parser.error("--window must be 0.1..600 seconds")
    try:
        jobs = [parse_job(text) for text in args.collocate]
    except ValueError as exc:
        parser.error(str(exc))
    try:
        gpu = query_gpu(args.gpu)
        rows = collocate(jobs, f"cuda:{args.gpu}", args.window)
        import torch  # noqa: PLC0415  (loaded by collocate already)

        record_collocation(rows, args.collocation_out, gpu, torch.__version__)
    except (ProfileError, EstimatorError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for row in rows:
        print(json.dumps({**asdict(row), "speed": round(row.speed, 4)}) if args.json else
              f"{row.model} {row.task} b{row.batch} with {row.k - 1} others: "
              f"{row.speed:.3f} of its speed alone", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
