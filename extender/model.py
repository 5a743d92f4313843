"""Domain types shared by the wire layers, the core and the store (no I/O here).

Units are in the names: MiB for memory, seconds for time, epoch seconds for
instants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

# Pod annotations (the opt-in contract).
ANNOTATION_PREFIX = "schedtune.io/"
MODEL = ANNOTATION_PREFIX + "model"
TASK = ANNOTATION_PREFIX + "task"
BATCH = ANNOTATION_PREFIX + "batch-size"
EPOCHS = ANNOTATION_PREFIX + "epochs"
REQUESTS = ANNOTATION_PREFIX + "requests"
GPU_MEMORY = ANNOTATION_PREFIX + "gpu-memory"  # declared MiB per GPU: reserved as declared
EXPECTED_S = ANNOTATION_PREFIX + "expected-seconds"
# Transformer (LLM) jobs: how the model runs.
SEQ_LEN = ANNOTATION_PREFIX + "seq-len"
DTYPE = ANNOTATION_PREFIX + "dtype"
TRAIN_MODE = ANNOTATION_PREFIX + "train-mode"
LORA_RANK = ANNOTATION_PREFIX + "lora-rank"
CHECKPOINTING = ANNOTATION_PREFIX + "gradient-checkpointing"
CONCURRENCY = ANNOTATION_PREFIX + "concurrent-seqs"
# Written on the pod at bind time, so Redis can be rebuilt from the API.
GPU = ANNOTATION_PREFIX + "gpu"
RESERVED_MIB = ANNOTATION_PREFIX + "reserved-mib"
PREDICTED_S = ANNOTATION_PREFIX + "predicted-seconds"
SIGNATURE = ANNOTATION_PREFIX + "reservation-signature"  # HMAC of the three above, uid, node
SIZING = ANNOTATION_PREFIX + "sizing"  # how the reserved MiB were decided (pad, declared, floor)
# The learned time correction the predicted seconds include, when one applied.
TIME_CORRECTION = ANNOTATION_PREFIX + "time-correction"
# A gang of our own, where no PodGroup names one: its name and how many members it has.
GANG = ANNOTATION_PREFIX + "gang"
GANG_SIZE = ANNOTATION_PREFIX + "gang-size"
# Written by the monitor on a waiting pod that now fits: kube-scheduler retries it at once.
REQUEUED_AT = ANNOTATION_PREFIX + "requeued-at"

# GPU Feature Discovery labels and extended resources.
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_MEMORY = "nvidia.com/gpu.memory"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
RESOURCE_GPU = "nvidia.com/gpu"
RESOURCE_VOLCANO_MEMORY = "volcano.sh/gpu-memory"
RESOURCE_VOLCANO_NUMBER = "volcano.sh/gpu-number"

UNKNOWN_TYPE = "unknown"  # the GPU type of a product the catalogue does not know


@dataclass(frozen=True)
class GroupRef:
    """The pod group a pod says it belongs to. `kind`: who defines the group ("workload":
    Kubernetes' in-tree PodGroup, "volcano", "coscheduling": scheduler-plugins', "schedtune":
    our own annotations); `size`: its members, when the pod itself says (ours), else 0
    (read from the PodGroup object)."""

    kind: str
    name: str
    size: int = 0


@dataclass(frozen=True)
class PodInfo:
    """A pod as the verbs see it: identity and annotations (the wire layers decode it)."""

    uid: str
    name: str
    namespace: str
    annotations: Mapping[str, Any] = field(default_factory=dict)
    gpus: int = 0  # ``nvidia.com/gpu`` its containers request (0: none, GPUs shared)
    owner: str = ""  # its controller, kind/name (a Job, a ReplicaSet), "" for a bare pod
    group: GroupRef | None = None  # the gang it belongs to (None: placed on its own)
    cpu_milli: int = 0  # CPU it requests of its node, millicores (0: none, or unreadable)
    no_devices: bool = False  # asks no GPU or other device of any kind (False: not known)


@dataclass(frozen=True)
class PodDemand:
    """What an annotated pod asks for. `units` = epochs (train) or requests (inference).

    `model` is "" for a pod that only declares its memory (`declared_mib` per GPU, or
    `declared_percent` of each GPU's memory, as KAI's gpu-fraction and HAMi's
    gpumem-percentage ask);
    `gpus`: distinct GPUs of one node it needs at once. The transformer fields are 0 or
    "" when not annotated (the estimator's defaults apply); `transformer_annotations` names
    the ones annotated, at any value (false and defaults too). Flat, so it stores as JSON."""

    uid: str
    name: str
    namespace: str
    model: str
    task: str
    batch: int
    units: int
    declared_mib: int = 0
    declared_percent: int = 0  # of each GPU's memory (``schedtune.io/gpu-memory: 50%``), 0: none
    expected_s: int = 0
    gpus: int = 1
    owner: str = ""
    seq_len: int = 0
    dtype: str = ""
    train_mode: str = ""
    lora_rank: int = 0
    checkpointing: bool = False
    concurrency: int = 0
    transformer_annotations: str = ""  # those the pod carries, by name ("a, b"): any value
    cpu_milli: int = 0  # CPU the pod requests of its node (`PodInfo.cpu_milli`)


@dataclass(frozen=True)
class NodeGpus:
    """A node's GPUs as its labels describe them (all GPUs of a node share one product).

    `gpu_type` is the catalogue name, None when the product is unknown.
    `share_slots`: pods one GPU can hold by the cluster's sharing mechanism
    (time-slicing replicas; 0 = memory-based sharing, no slot limit; 1 = exclusive).
    `problem` is set, and `count` 0, when the labels are missing or not believable.
    `uuids`: each GPU's UUID by index, when a node agent registered them (HAMi), else ().
    `memories`: each GPU's MiB by index when they differ (a node agent's register), else ();
    `memory_mib` is then the largest. `cpu_milli`: the node's allocatable CPU (0: not known).
    """

    product: str
    gpu_type: str | None
    count: int
    memory_mib: int
    share_slots: int = 1
    problem: str = ""
    uuids: tuple[str, ...] = ()
    memories: tuple[int, ...] = ()
    cpu_milli: int = 0

    def memory_of(self, index: int) -> int:
        """GPU `index`'s MiB (the largest for an index the node does not have)."""
        return self.memories[index] if 0 <= index < len(self.memories) else self.memory_mib

    @property
    def total_mib(self) -> int:
        return sum(self.memories) if self.memories else self.count * self.memory_mib

    def as_row(self) -> tuple[str, str | None, int, int, int, str, tuple[str, ...],
                              tuple[int, ...], int]:
        """Field values in order (`NodeGpus(*row)` rebuilds it); cheaper than deep `astuple`."""
        return (self.product, self.gpu_type, self.count, self.memory_mib, self.share_slots,
                self.problem, self.uuids, self.memories, self.cpu_milli)


@dataclass(frozen=True)
class Need:
    """The job on one GPU type: padded memory to reserve and predicted seconds alone;
    `pad`: the fraction added to the predicted memory; `seen`: the GPU type was in the
    estimator's training rows (all three said in the pod's event). `gpus`: distinct GPUs
    of one node the pod needs at once (``nvidia.com/gpu: k``), each with `padded_mib` free
    (the per-replica need); the pod completes with the slowest of them."""

    padded_mib: float
    predicted_s: float
    pad: float = 0.0
    seen: bool = True
    oom_floor: bool = False  # raised to the floor an earlier OOM kill of the job set
    gpus: int = 1
    declared_mib: float = 0.0  # what the pod declared (schedtune.io/gpu-memory), 0: nothing
    family_seen: bool = True  # the model's family was in the estimator's training rows
    estimate_mib: float = 0.0  # the padded prediction, before declared memory or a floor
    basis: str = ""  # "" the regressors; "transformer": the analytic LLM estimate
    time_factor: float = 1.0  # predicted_s is the estimate times this (learned bias)
    time_correction: str = ""  # the learned bias applied (`time_bias.bias_key`), "": none
    declared_percent: int = 0  # the declaration was this percent of a GPU's memory

    def on(self, gpus: NodeGpus) -> Need:
        """This need on a node of `gpus`: a type's need takes a declared percentage of its
        largest card; where the declaration alone decides, it is taken of this node's card
        instead (a type can hold cards of several sizes: products the catalogue does not
        know all share `UNKNOWN_TYPE`)."""
        if not self.declared_percent or self.padded_mib > self.declared_mib or self.oom_floor:
            return self
        declared = percent_of(self.declared_percent, gpus.memory_mib)
        if declared == self.declared_mib:
            return self
        return replace(self, padded_mib=max(self.estimate_mib, declared), declared_mib=declared)


@dataclass(frozen=True)
class Limits:
    """Collocation limits per GPU type (paper IV-G); `default` for types not listed."""

    default: int
    per_type: Mapping[str, int]

    def __hash__(self) -> int:  # decisions kept per limits (`GpuTable.remember`)
        return hash((self.default, tuple(sorted(self.per_type.items()))))

    def for_node(self, gpus: NodeGpus) -> int:
        limit = self.per_type.get(gpus.gpu_type or UNKNOWN_TYPE, self.default)
        return min(limit, gpus.share_slots) if gpus.share_slots > 0 else limit


def percent_of(percent: int, gpu_mib: int) -> float:
    """`percent` of a GPU of `gpu_mib` in whole MiB, rounded down as HAMi computes
    gpumem-percentage (shares that add up to 100 % fit one GPU)."""
    return float(percent * gpu_mib // 100)


def type_of(gpus: NodeGpus) -> str:
    """The catalogue type of a node's GPUs, `UNKNOWN_TYPE` for products it does not know."""
    return gpus.gpu_type or UNKNOWN_TYPE


def need_on(needs: Mapping[str, Need], gpus: NodeGpus) -> Need:
    """The job's need on a node of `gpus` (`Need.on` its type's). KeyError for a type
    `needs` lacks."""
    return needs[type_of(gpus)].on(gpus)


@dataclass(frozen=True)
class JobRecord:
    """One reservation on one GPU, as the store holds it."""

    uid: str
    pod: str
    namespace: str
    model: str
    task: str
    node: str
    gpu_index: int
    reserved_mib: float
    predicted_s: float
    state: str  # "reserved" (not bound yet), "bound", "running"
    reserved_at: float
    started_at: float = 0.0
    expires_at: float = 0.0  # 0: no expiry (bound or running)
    gpu_type: str = ""
    batch: int = 0
    units: int = 0
    gpu_indices: tuple[int, ...] = ()  # every GPU of a multi-GPU pod (gpu_index first)
    grown_mib: float = 0.0  # part of reserved_mib added beside an OOM kill (grow_beside)
    device_uuids: tuple[str, ...] = ()  # the GPUs' UUIDs a node agent was handed, by `gpus`
    handed_over_at: float = 0.0  # when a node agent was handed the GPUs (0: not, or answered)
    time_factor: float = 1.0  # predicted_s is the estimate times this (a learned bias)
    time_correction: str = ""  # which learned bias that was (`time_bias.bias_key`)
    cpu_milli: int = 0  # CPU the pod requested of the node (`PodDemand.cpu_milli`)

    @property
    def gpus(self) -> tuple[int, ...]:
        """The GPUs the reservation holds `reserved_mib` on, each."""
        return self.gpu_indices or (self.gpu_index,)

    @property
    def own_mib(self) -> float:
        """What the job's own sizing reserved, before any growth beside a kill."""
        return self.reserved_mib - self.grown_mib


@dataclass(frozen=True)
class Reservation:
    """Where a pod's reservation is. `new`: made by this call (False: the pod already held
    it, and binding again is idempotent). `gpu_indices`: all its GPUs, first one first."""

    uid: str
    node: str
    gpu_index: int
    new: bool
    gpu_indices: tuple[int, ...] = ()

    @property
    def gpus(self) -> tuple[int, ...]:
        return self.gpu_indices or (self.gpu_index,)


@dataclass(frozen=True)
class FilterRecord:
    """What filter keeps for bind, whose request names only the pod and the node.

    `layouts`: the layouts the request carried for the nodes that passed (full-nodes
    mode; bind only ever comes to one of them, and caps them at the node watcher's; in
    names mode the watcher's are in the store). `held`: per passing node, the GPUs a hold
    keeps from this pod.
    """

    demand: PodDemand
    layouts: Mapping[str, NodeGpus] = field(default_factory=dict)
    held: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    gang: str = ""  # namespace/name of the gang whose plan placed the pod ("" none)


class QueuedJob(NamedTuple):
    """A queue member as decisions see it. `started_at` > 0 once running;
    `expires_at` > 0 while a reservation waits for bind to confirm it."""

    uid: str
    reserved_mib: float
    predicted_s: float
    started_at: float = 0.0
    expires_at: float = 0.0
    cpu_milli: float = 0.0  # CPU its pod requested of the node (0: none, or not known)


@dataclass(frozen=True, slots=True)
class GpuState:
    """One physical GPU and the live reservations on it (`free_mib` derived once, here)."""

    node: str
    index: int
    capacity_mib: int
    jobs: tuple[QueuedJob, ...] = ()
    reserved_mib: float = field(init=False)
    free_mib: float = field(init=False)

    def __post_init__(self) -> None:
        reserved = sum(j.reserved_mib for j in self.jobs)
        object.__setattr__(self, "reserved_mib", reserved)
        object.__setattr__(self, "free_mib", self.capacity_mib - reserved)


@dataclass(frozen=True)
class NodeState:
    """A node's layout and GPUs. `idle`: no live reservation on any GPU, so its verdict
    and score depend on the layout alone."""

    name: str
    gpus: NodeGpus | None
    gpu_states: tuple[GpuState, ...] = ()
    idle: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "idle", not any(g.jobs for g in self.gpu_states))


class Waiter(NamedTuple):
    """An annotated pod that fit nowhere when last filtered, waiting for room.

    `needs`: GPU type -> (padded MiB, predicted seconds alone), as its filter estimated.
    `since`: when it was first refused (waiters are served oldest first).
    `pod`: namespace/name, for operators. `gpus`: GPUs of one node it needs at once;
    `members`: a gang waits as one waiter of that many members, each on `gpus` GPUs of
    one node.
    """

    uid: str
    since: float
    needs: Mapping[str, tuple[float, float]]
    pod: str = ""
    gpus: int = 1
    members: int = 1

    @property
    def shortest_s(self) -> float:
        """Its predicted seconds on the GPU type that runs it fastest (inf: no type)."""
        return min((seconds for _, seconds in self.needs.values()), default=math.inf)


def job_type(model: str, task: str, batch: int, gpu_type: str) -> str:
    """What an OOM floor is kept per: the same job on the same GPU type."""
    return f"{model}|{task}|{batch}|{gpu_type}"


@dataclass(frozen=True)
class Decision:
    """A decision told to the pod's owner (a Kubernetes Event the monitor posts) and to
    operators (the status page's recent decisions), in the words `kubectl describe` shows.

    `kind`: reserved | waiting | held | released. `once_key`: told at most once per
    `once_for_s` (a waiting pod is filtered again and again)."""

    kind: str
    uid: str
    pod: str  # namespace/name
    message: str
    node: str = ""
    once_key: str = ""


@dataclass(frozen=True)
class ClusterSnapshot:
    """A frozen read of the nodes a request names: decisions read this, never live keys.

    `waiting`: live waiters, oldest first; `floors`: the least a job type may reserve
    after an OOM kill of it (`extender.core.oom`); `alphas`: the collocation slowdowns
    the monitor learned per GPU type (`extender.core.interference`); `time_biases`: how
    far the time estimate is off per GPU type and job class (`extender.core.time_bias`)."""

    now: float
    nodes: dict[str, NodeState] = field(default_factory=dict)
    waiting: tuple[Waiter, ...] = ()
    floors: Mapping[str, float] = field(default_factory=dict)  # `job_type` -> MiB after OOMs
    alphas: Mapping[str, float] = field(default_factory=dict)  # GPU type -> learned alpha
    time_biases: Mapping[str, float] = field(default_factory=dict)  # `time_bias.bias_key`


@dataclass(frozen=True)
class Verdict:
    """Filter's answer for one node. `unresolvable`: preemption cannot make it fit.

    Holds no node name, so idle nodes of one layout share one verdict.
    """

    fits: bool
    reason: str = ""
    gpu_index: int | None = None
    unresolvable: bool = False
