"""The decisions a pod's owner is told, in `kubectl describe` words. Pure.

The extender writes them to Redis as it decides (`RedisStore.record_filter`,
`log_decisions`); the monitor posts each as an Event on the pod and the status page
lists the latest.
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.core.room import Holds
from extender.model import Decision, JobRecord, Need, NodeGpus, Reservation, Waiter

MAX_TYPES_SAID = 4  # a waiting pod's needs: the smallest few GPU types


def sizing(need: Need) -> str:
    """How the reserved MiB were decided, in the pod's event and its annotation."""
    if need.oom_floor:
        return "the floor an earlier OOM kill of this job set"
    if need.declared_mib and not need.estimate_mib:
        return "as declared (schedtune.io/gpu-memory), no pad"
    unseen = [what for what, seen in (("family", need.family_seen), ("GPU type", need.seen))
              if not seen]
    basis = (f"{' and '.join(unseen)} not in training data: the pad for jobs unlike any "
             "trained on" if unseen else "family and GPU type seen in training")
    if need.basis == "transformer":
        basis = "analytic transformer estimate, pad from published measurements"
    pad = f"pad {need.pad * 100:.1f} % ({basis})"
    if not need.declared_mib:
        return pad
    if need.declared_mib >= need.estimate_mib:
        return (f"declared {need.declared_mib:.0f} MiB, above the padded prediction "
                f"{need.estimate_mib:.0f} MiB ({pad})")
    return (f"padded prediction {need.estimate_mib:.0f} MiB ({pad}), above the declared "
            f"{need.declared_mib:.0f} MiB")


def timing(need: Need) -> str:
    """The learned correction in the predicted seconds (`extender.core.time_bias`), in the
    pod's event, its annotation and `schedtune queues`; "" when none applied."""
    if not need.time_correction:
        return ""
    return f"x{need.time_factor:.2f} learned from observed runs ({need.time_correction})"


def reserved(namespace: str, name: str, reservation: Reservation, gpus: NodeGpus,
             need: Need) -> Decision:
    label = gpus.gpu_type or gpus.product
    why = sizing(need)
    learned = f" ({timing(need)})" if need.time_correction else ""
    return Decision("reserved", reservation.uid, f"{namespace}/{name}", (
        f"reserved {need.padded_mib:.0f} MiB of {gpus.memory_mib} on "
        f"{_gpus_said(reservation.gpus)} ({label}) of {reservation.node}; predicted "
        f"{need.predicted_s:.0f} s{learned}; {why}"), reservation.node)


def waiting(waiter: Waiter, why: str = "") -> Decision:
    """`why`: the pod fits somewhere but waits for a faster GPU (else: it fits nowhere)."""
    needs = sorted(waiter.needs.items(), key=lambda item: item[1][0])[:MAX_TYPES_SAID]
    said = ", ".join(f"{t} {mib:.0f} MiB ({s:.0f} s)" for t, (mib, s) in needs)
    return Decision("waiting", waiter.uid, waiter.pod,
                    f"{why or 'waiting for GPU memory: no GPU has room now'}; needs {said}",
                    once_key=f"waiting:{waiter.uid}")


def held(uid: str, pod: str, node: str, gpu_index: int, gpus: NodeGpus | None,
         padded_mib: float, shorter: bool = False) -> Decision:
    label = (gpus.gpu_type or gpus.product) if gpus is not None else "GPU"
    return Decision("held", uid, pod, (
        f"GPU {gpu_index} ({label}) of {node} is held for this pod: {padded_mib:.0f} MiB "
        f"kept from {'longer' if shorter else 'newer'} pods until it fits"), node,
        once_key=f"held:{uid}:{node}:{gpu_index}")


def holds_told(holds: Holds, waiting_pods: tuple[Waiter, ...],
               layouts: Mapping[str, NodeGpus | None]) -> tuple[Decision, ...]:
    """One `held` decision per GPU held for a waiter."""
    pods = {w.uid: w.pod for w in waiting_pods}
    return tuple(held(hold.uid, pods.get(hold.uid, ""), node, index, layouts.get(node),
                      hold.padded_mib, hold.shorter) for (node, index), hold in holds.items())


def released(job: JobRecord, outcome: str) -> Decision:
    return Decision("released", job.uid, f"{job.namespace}/{job.pod}", (
        f"released {job.reserved_mib:.0f} MiB on {_gpus_said(job.gpus)} of {job.node} "
        f"(pod {outcome})"), job.node)


def _gpus_said(indices: tuple[int, ...]) -> str:
    if len(indices) == 1:
        return f"GPU {indices[0]}"
    return f"each of GPUs {','.join(map(str, indices))}"
