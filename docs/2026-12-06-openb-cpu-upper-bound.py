"""Experiment (2026-12-06, issue #52): what seeing CPU would give ours on openb under FGD's
protocol, before building it. Ours runs through HTTP as `schedtune replay --workload openb
--protocol fgd` runs it, except that its fragmentation tie-break
(`prioritizing._fragmentation_delta`) is replaced, in this process only, by FGD's own
measure (`replay.fgd_policies.Fragmentation`, the trace's target workload with each kind's
CPU) on the GPUs ours chose, given each node's CPU left as

    true     every pod's CPU (what kube-scheduler knows)
    partial  the node's allocatable CPU less what the GPU pods placed asked (what the
             extender could know from the pods it places and the nodes it watches)
    blind    none (a node's CPU never strands its GPUs)

Run from the repository root (about 4 minutes a seed on 2 cores):

    EXTENDER_INTERFERENCE_ALPHA=0 PYTHONPATH=. python docs/2026-12-06-openb-cpu-upper-bound.py \
        partial 1,2,3 ../shared/data/alibaba-openb
"""

import os
import sys

import numpy as np

from extender.core import prioritizing
from extender.settings import Settings
from replay import fgd_protocol
from replay.fgd_extender import ExtenderOnFgd
from replay.fgd_policies import Fragmentation, TargetWorkload
from replay.runner import replay_redis

MODE, SEEDS, TRACE = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
now: dict = {}  # the replay's state, the pod being placed, FGD's measure, CPU seen


def fgd_delta(table, fit, placed):
    """Per placement, FGD's fragmentation after minus before, in percent of a GPU."""
    state, pod = now["state"], now["pod"]
    node_of_row = np.array([now["position"][table.names[i]]
                            for i in table.seg_nodes[table.gpu_seg[placed.rows]]])
    node = np.zeros(len(placed.nodes), np.int64)
    node[placed.owner] = node_of_row
    cpu = {"true": state.cpu_left, "partial": now["seen"],
           "blind": np.full(len(state), 10**9)}[MODE][node]
    left, model = state.gpu_left[node], state.model_id[node]
    after = left.copy()
    after[placed.owner, table.gpu_index[placed.rows]] -= min(pod.gpu_milli, 1000)
    return (now["frag"](cpu - pod.cpu, after, model) - now["frag"](cpu, left, model)) / 10.0


class Seeing(ExtenderOnFgd):
    def reset(self, state):
        super().reset(state)
        now.update(frag=Fragmentation(now["target"], state), seen=state.nodes.cpu.copy(),
                   position={n: i for i, n in enumerate(state.nodes.names)})

    def choose(self, state, pod):
        now.update(state=state, pod=pod)
        choice = super().choose(state, pod)
        if choice is not None and pod.gpu_request:
            now["seen"][choice[0]] -= pod.cpu
        return choice


if __name__ == "__main__":
    prioritizing._fragmentation_delta = fgd_delta
    _, pods = fgd_protocol.load_trace(TRACE)
    now["target"] = TargetWorkload.from_pods(pods)
    with replay_redis(os.environ) as url:
        settings = Settings.from_env(os.environ)
        result = fgd_protocol.run_protocol(TRACE, ["ours"], SEEDS,
                                           make=lambda name, pods: Seeing(url, settings))
    print(MODE, result["ours"]["per_seed"], result["ours"]["unallocated_gpu_pct_at_100"])
