"""Where FGD's pods asking no GPU go, and what it does to the GPUs left unallocated
(docs/2026-12-07-openb-no-gpu-pods.md). FGD decides every pod asking a GPU; the pods asking
none are placed by RULE, in-process, FGD's protocol, seeds 1..N:

    PYTHONPATH=. python docs/2026-12-07-openb-no-gpu-pods.py RULE N

RULE: gpu-most (the node with the largest share of its GPUs allocated), fgd-full (FGD's
measure with every pod's CPU: FGD itself), fgd-partial (FGD's measure seeing only the CPU
of the pods asking a GPU, as the extender sees it), fgd-partial-gpuonly (the same, its mix
the trace's typical pods asking a GPU), fgd-partial-tie (fgd-partial, ties to gpu-most).
Every rule's ties go to the seeded node permutation, as kube-scheduler's random pick."""

import sys

import numpy as np

from replay import fgd_policies as fp
from replay.fgd_cluster import feasible
from replay.fgd_protocol import run_protocol
from replay.fgd_workload import load_trace

TRACE = "../shared/data/alibaba-openb"


def gpu_used_pct(state):
    total = state.n_gpu * 1000
    used = total - state.gpu_free_total
    return np.where(total > 0, np.floor(100 * used / np.maximum(total, 1)), 100).astype(np.int64)


class Variant(fp.FGD):
    name = "variant"

    def reset(self, state):
        super().reset(state)
        self.gpu_cpu = np.zeros(len(state), np.int64)  # CPU of the pods asking a GPU, per node
        self.gpu_only = fp.Fragmentation(fp.TargetWorkload.from_pods(GPU_PODS), state)

    def choose(self, state, pod):
        if pod.gpu_request:
            choice = super().choose(state, pod)
            if choice is not None:
                self.gpu_cpu[choice[0]] += pod.cpu
            return choice
        ok = feasible(state, pod)
        if not ok.any():
            return None
        if RULE == "gpu-most":
            score = gpu_used_pct(state)
        else:
            partial = "partial" in RULE
            cpu = state.nodes.cpu.astype(np.int64) - self.gpu_cpu if partial else state.cpu_left
            frag = self.gpu_only if "gpuonly" in RULE else self.frag
            before = frag(cpu, state.gpu_left, state.model_id)
            after = frag(cpu - pod.cpu, state.gpu_left, state.model_id)
            score = fp._fgd_score(before, after)
            if RULE.endswith("tie"):
                score = score * 1000 + gpu_used_pct(state) * 10
        node = fp.pick_node(state, ok, score)
        return None if node is None else (node, ())


RULE, SEEDS = sys.argv[1], int(sys.argv[2])
_, PODS = load_trace(TRACE)
GPU_PODS = PODS.take(np.flatnonzero(PODS.num_gpu > 0))
fp.POLICIES["variant"] = Variant
fp.TARGETED = (*fp.TARGETED, "variant")
out = run_protocol(TRACE, ["variant"], seeds=range(1, SEEDS + 1))["variant"]
print(RULE, out["unallocated_gpu_pct_at_100"], out["per_seed"])
