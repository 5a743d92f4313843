"""`schedtune bench`: extender latency against a no-op extender, in the same run on the same
machine (the harness: the `bench` package).

    schedtune bench --nodes 100 --mode full --json
    schedtune bench --nodes 1000 5000 --mode names --pods 200

Per case (node count), starts both under gunicorn (same worker count) on 127.0.0.1 and
replays filter + prioritize for a stream of annotated pods, one pod at a time as
kube-scheduler does, each pod's nodes in a new order as its parallel filters list them
(`--node-order fixed`: one order), alternating pod by pod between the no-op and ours so
both see the same load on a shared machine; prioritize is sent the nodes that server's
filter passed, as kube-scheduler sends them. Prints per-pod milliseconds (mean, p50, p99),
the ratio of the means (the median of `--rounds` replays of the same pods, their range
beside it: the floor moves from one to the next), and where ours spends its time: the same
bodies replayed in-process through the verbs' public pieces (parse: depth check, JSON,
decode, as the verbs do it: node objects seen before are not parsed again; state sync: the
snapshot; estimation: needs per GPU type; decision; write: the filter record; encode: the
answer as bytes; prioritize, in filter's cycle, answers with the scores priced once
filter's answer was sent: no state sync, estimation or pricing of its own), each as a
share of their sum, with the whole verb timed through the service beside it (`service`
minus the pieces inside it: its own overhead), and `after answer`: what a worker does
once filter has answered (prioritize's scores priced and encoded), off the path the
ratio times, as it is off kube-scheduler's (which runs its own score plugins then).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Run as `python scripts/bench_extender.py`, Python puts scripts/ first on the path, where
# scripts/chaos.py would shadow the `chaos` package: the checkout goes before it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.latency import Options, render_table, run_case  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100],
                        help="node counts, one case each (default 100)")
    parser.add_argument("--mode", choices=("full", "names"), default="full")
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3,
                        help="replays of the pods through both servers (default 3); the "
                        "ratio is the median of the rounds' ratios, their range beside it")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=0,
                        help="GPUs per node (default 0: 1, 2, 4 or 8 at random); the "
                        "openb trace's scale: --nodes 1200 --gpus 5")
    parser.add_argument("--busy", type=float, default=0.3,
                        help="fraction of GPUs that already run a job (default 0.3)")
    parser.add_argument("--phase-pods", type=int, default=50,
                        help="pods replayed in-process for the phase profile (0: none)")
    parser.add_argument("--node-order", choices=("shuffled", "fixed"), default="shuffled",
                        help="shuffled (default): each pod's nodes in a new order, as "
                        "kube-scheduler's parallel filters list them; fixed: one order")
    parser.add_argument("--gap", choices=("client", "none"), default="client",
                        help="client (default): prioritize's body is built from filter's "
                        "answer between the two calls, untimed, as kube-scheduler builds it "
                        "after its own score plugins; none: built in an earlier untimed "
                        "pass and sent at once (what a worker does after answering filter "
                        "then delays prioritize)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not all(1 <= n <= 20000 for n in args.nodes) or not 1 <= args.pods <= 100000:
        parser.error("--nodes must be 1..20000 and --pods 1..100000")
    if not 1 <= args.rounds <= 100:
        parser.error("--rounds must be 1..100")
    if not 0 <= args.busy <= 1 or not 0 <= args.phase_pods <= args.pods:
        parser.error("--busy must be a fraction in 0..1 and --phase-pods 0..--pods")
    if not 0 <= args.gpus <= 64:
        parser.error("--gpus must be 0..64")
    options = Options(mode=args.mode, pods=args.pods, rounds=args.rounds, workers=args.workers,
                      gpus=args.gpus, busy=args.busy, phase_pods=args.phase_pods,
                      node_order=args.node_order, gap=args.gap)
    cases = []
    for count in args.nodes:
        cases.append(run_case(count, options))
        print(f"{count} nodes ({args.mode}): ratio {cases[-1]['ratio']}", file=sys.stderr)
    print(json.dumps({"cases": cases}) if args.json else render_table(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
