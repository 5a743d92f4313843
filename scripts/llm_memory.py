"""LLM memory estimates against published measurements, or one job on every catalogue GPU.

    schedtune llm-memory                         # every measured figure: estimate, error, floor
    schedtune llm-memory --breakdown --json      # ... with each estimate's parts, as JSON
    schedtune llm-memory --model llama-3.1-8b --mode lora --lora-rank 16 --seq-len 2048 \\
        --batch 2 --checkpointing                # that job on every GPU type: padded MiB, fit, time
    schedtune llm-memory --model llama-3.1-8b --task inference --seq-len 8192 --concurrent 8
    schedtune llm-memory --config my-config.json --task inference   # your own config.json
    schedtune llm-memory --write-pad             # re-derive profiles/llm/pad.json

The logic lives in `estimator.transformer.validation`; this file parses, prints and exits
(0 ok, 1 an estimator error, 2 usage).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError, InvalidJob
from estimator.transformer import LlmWorkload, TransformerConfig, shipped_config, shipped_configs, \
    shipped_pad
from estimator.transformer.config import read_json
from estimator.transformer.validation import (MEASURED_FILE, PAD_FILE, compare_all, gpu_table,
                                      load_measurements, pad_document, report)

PARTS = ("weights", "gradients", "optimizer", "master_weights", "activations", "logits",
         "kv_cache", "workspace", "cuda_context")


def render_report(doc: dict[str, Any], breakdown: bool) -> str:
    lines = [f"{'measurement':<40} {'scope':<15} {'meas GiB':>8} {'est GiB':>8} {'err':>7} "
             f"{'floor':>6} {'held-out padded':>15}  phase"]
    for r in doc["rows"]:
        flag = " *" if r["not_modelled"] else ""
        lines.append(f"{r['id']:<40} {r['scope']:<15} {r['measured_gib']:>8.2f} "
                     f"{r['estimate_gib']:>8.2f} {r['error_pct']:>+6.1f}% "
                     f"{r['lower_bound_gib']:>6.2f} {r['held_out_padded_error_pct']:>+14.1f}%  "
                     f"{r['phase']}{flag}")
        if breakdown:
            parts = ", ".join(f"{p} {r['breakdown_mib'][p] / 1024:.2f}" for p in PARTS
                              if r["breakdown_mib"][p])
            lines.append(f"    GiB: {parts}")
    s = doc["summary"]
    held = ", ".join(f"{g} {p:.1f} %" for g, p in s["held_out_pad_pct"].items())
    lines += [
        "* the run used features the estimate does not model (" + ", ".join(sorted(
            {f for r in doc["rows"] for f in r["not_modelled"]})) + "): it errs high there",
        f"mean |error| {s['mean_abs_error_pct']:.1f} % "
        f"({s['mean_abs_error_pct_fully_modelled']:.1f} % without *); "
        f"worst under {s['worst_under_estimate_pct']:+.1f} %, "
        f"worst over {s['worst_over_estimate_pct']:+.1f} %",
        f"pad: {s['pad_in_sample_pct']:.1f} % in-sample (floor {s['pad_floor_pct']:.0f} %); "
        f"leave-one-source-out pads: {held}",
        f"under-allocated with the held-out pad: {s['under_allocated_held_out']} of {s['rows']}",
    ]
    return "\n".join(lines)


def render_gpus(rows: list[dict[str, Any]], task: str) -> str:
    unit = "s/step" if task == "train" else "s/request"
    lines = [f"{'GPU':<11} {'memory':>8} {'estimate':>9} {'padded':>9} {'fits':>5} {unit:>11}"
             "  (MiB)"]
    for r in rows:
        t = r["time"]["step_s"] if task == "train" else r["time"]["seconds_per_request"]
        lines.append(f"{r['gpu']:<11} {r['memory_mib']:>8} {r['total_mib']:>9.0f} "
                     f"{r['padded_mib']:>9.0f} {'yes' if r['fits'] else 'no':>5} {t:>11.3f}")
    return "\n".join(lines)


def _workload(args: argparse.Namespace) -> LlmWorkload:
    targets: Any = args.lora_targets
    if "," in targets:
        targets = tuple(t.strip() for t in targets.split(","))
    return LlmWorkload(
        task=args.task, dtype=args.dtype, seq_len=args.seq_len, batch=args.batch,
        mode=args.mode, lora_rank=args.lora_rank, lora_targets=targets,
        lora_dropout=args.lora_dropout, adapter_fp32=not args.adapter_same_dtype,
        gradient_checkpointing=args.checkpointing, optimizer=args.optimizer,
        master_weights=not args.pure_16bit, loss_chunks=args.loss_chunks,
        attention=args.attention, concurrent_seqs=args.concurrent,
        output_tokens=args.output_tokens, kv_dtype=args.kv_dtype,
        prefill_tokens=args.prefill_tokens)


def _config(args: argparse.Namespace) -> TransformerConfig:
    if args.config:
        return TransformerConfig.from_mapping(read_json(Path(args.config)))
    return shipped_config(args.model)


def _check_measured(path: Path) -> None:
    """Refuse a measurements file that is not an object with a list of objects."""
    if not path.is_file():
        return  # load_measurements says it is missing
    doc = read_json(path)
    entries = doc.get("measurements") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InvalidJob(f"{path}: expected an object whose \"measurements\" is a list of "
                         "objects")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--breakdown", action="store_true", help="each estimate's parts")
    p.add_argument("--measured", type=Path, default=MEASURED_FILE, help="measurements file")
    p.add_argument("--write-pad", action="store_true", help=f"write {PAD_FILE}")
    job = p.add_argument_group("one job on every GPU type (with --model or --config)")
    job.add_argument("--model", help="a shipped configuration (profiles/llm/configs.json)")
    job.add_argument("--config", help="a config.json (Hugging Face keys or ours)")
    job.add_argument("--pad", type=float, help="pad fraction (default: the shipped pad)")
    job.add_argument("--task", default="train", choices=("train", "inference"))
    job.add_argument("--dtype", default="bf16")
    job.add_argument("--seq-len", type=int, default=2048)
    job.add_argument("--batch", type=int, default=1)
    job.add_argument("--mode", default="full", choices=("full", "lora"))
    job.add_argument("--lora-rank", type=int, default=16)
    job.add_argument("--lora-targets", default="all-linear",
                     help="all-linear, attention, qv, or names like q,v,o,gate,up,down")
    job.add_argument("--lora-dropout", action="store_true")
    job.add_argument("--adapter-same-dtype", action="store_true",
                     help="adapters in the compute dtype (torchtune) rather than fp32 (PEFT)")
    job.add_argument("--checkpointing", action="store_true", help="gradient checkpointing")
    job.add_argument("--optimizer", default="adamw")
    job.add_argument("--pure-16bit", action="store_true",
                     help="no fp32 master weights: optimizer state in the weights' dtype")
    job.add_argument("--loss-chunks", type=int, default=1)
    job.add_argument("--attention", default="flash", choices=("flash", "eager"))
    job.add_argument("--concurrent", type=int, default=1, help="concurrent sequences")
    job.add_argument("--output-tokens", type=int)
    job.add_argument("--kv-dtype")
    job.add_argument("--prefill-tokens", type=int)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.model or args.config:
            workload = _workload(args)
            pad = shipped_pad() if args.pad is None else args.pad
            rows = gpu_table(_config(args), workload, pad)
            print(json.dumps({"pad": pad, "gpus": rows}, indent=1) if args.json
                  else render_gpus(rows, workload.task))
            return 0
        _check_measured(args.measured)
        configs = shipped_configs()
        comparisons = compare_all(load_measurements(configs, args.measured), configs)
        if args.write_pad:
            doc = pad_document(comparisons, args.measured.read_bytes())
            PAD_FILE.write_text(json.dumps(doc, indent=1) + "\n")
            print(f"wrote {PAD_FILE}: pad {doc['pad']:.4f}", file=sys.stderr)
        result = report(comparisons)
        print(json.dumps(result, indent=1) if args.json
              else render_report(result, args.breakdown))
        return 0
    except (EstimatorError, OSError, ValueError) as exc:
        print(f"llm-memory: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
