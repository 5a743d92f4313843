"""The state's Redis keys: their names, what each holds, how long it lives.

Key layout (human readable; every key is built by the names and helpers below):

    st:nodes                hash    node name -> JSON GPU layout from the node watcher
                                    (product, gpu_type, count, memory_mib, share_slots, problem)
    st:nodes:rev            string  bumped on every layout change (workers cache layouts by it)
    st:gpu:{node}:{index}   zset    the GPU's queue: pod UIDs scored by reservation time
    st:rev                  string  bumped by every change to a queue or a queued job
    st:changed              zset    queue keys scored by the rev of their last change
    st:epoch                string  id of this state, set by the first change; a new one
                                    (Redis wiped) makes every worker re-read all queues
    st:job:{uid}            hash    one reservation: pod, namespace, model, task, node,
                                    gpu_index, reserved_mib, predicted_s, state
                                    (reserved|bound|running), reserved_at, started_at,
                                    expires_at (0 = none), queue, and for a pod on
                                    several GPUs queues and gpus (comma-separated, the
                                    first is queue and gpu_index), source (who reserved:
                                    kube = a kube-scheduler bind, volcano = Volcano's
                                    allocate; absent on adopted placements), grown_mib
                                    (the part of reserved_mib added beside an OOM kill),
                                    device_uuids (the GPUs a node agent was handed) and
                                    handed_over_at (until it answered)
    st:jobs                 zset    every reserved pod UID, scored by reservation time
    st:demand:{uid}         string  JSON: what filter kept for bind (`FilterRecord`: the
                                    decoded demand; the layouts the request carried for
                                    the passing nodes, grouped as [[layout row, [node
                                    names]], ...]; held GPUs; expires after `demand_ttl_s`)
    st:observations         stream  finished runs (model, task, batch, units, gpu_type,
                                    node, gpus, started_at, seconds, predicted_s,
                                    reserved_mib, oom, outcome)
    st:ooms                 set     earlier versions' OOM kills seen (read, never written)
    st:oom:{event}          string  an OOM kill counted, per pod/container/restart (7 days)
    st:waiting              hash    pod UID -> JSON waiter: pod, since, expires_at, needs
                                    ({gpu type: [padded MiB, predicted s]}) for annotated
                                    pods that fit nowhere (removed on bind or release)
    st:waiting:order        zset    the waiting pods' UIDs scored by since (then UID): the
                                    oldest are read without the whole hash
    st:waiting:expiry       zset    the waiting pods' UIDs scored by expires_at: expired
                                    waiters are dropped without the whole hash
    st:waiting:short        zset    the waiting pods' UIDs scored by their shortest
                                    predicted seconds: the shortest are read likewise
    st:waiting:sweep        string  where the next waiter's write goes on sweeping the hash
    st:decisions            stream  decisions told to pods' owners (Events the monitor posts)
                                    and operators (the status page): kind, at, uid, pod,
                                    node, message; capped at about 2,000
    st:told:{once key}      string  a decision already told (expires after
                                    `decision_repeat_s`: a waiting pod is told once)
    st:told-quota:{ns}      string  repeated decisions of a namespace in the log this
                                    minute (at most `TOLD_QUOTA`; expires)
                                    (consumer group `event-posters`: the monitors)
    st:floor:{job}          hash    a job's (model|task|batch) GPU OOM floors: {namespace}|
                                    {GPU type} -> the least MiB that namespace's pods of it
                                    reserve on the type after a kill; {GPU type} -> the same
                                    for everyone, once two namespaces saw kills (only
                                    raised; a filter reads only its pod's job's hash)
    st:floor-jobs           set     the st:floor:{job} keys that hold floors
    st:handovers            zset    pod UIDs handed to a node agent and not answered yet,
                                    scored by when (the monitor checks the overdue ones)
    st:floor-kills:{type}   hash    namespace -> raises,window start,last kill: the GPU OOM
                                    kills of a job type (model|task|batch|GPU type; expires
                                    a window after the last)
    st:interference         hash    GPU type -> the collocation slowdown alpha the monitor
                                    learned from observed runs, and GPU type|runs -> how
                                    many runs it rests on (`extender.core.interference`;
                                    replaced at each refit; a type absent: the configured
                                    alpha)
    st:models               hash    model name -> JSON entry of a model users registered
                                    (`estimator.user_models.entry`: features or a transformer
                                    configuration); st:models:rev bumped on every change,
                                    st:models:epoch a token per registry (`model_store`)
    st:owner-runs:{owner}   hash    runs, seconds: the finished runs of a controller's
                                    ({namespace}/{kind}/{name}) declared-memory pods (their
                                    mean times its next pod when that declares no time);
                                    expires 30 days after its last run
    st:owner-runs           hash    earlier versions' {owner}|runs and |seconds of every
                                    owner: read, and folded into the owner's key
"""

from __future__ import annotations

NODES_KEY = "st:nodes"
NODES_REV_KEY = "st:nodes:rev"
REV_KEY = "st:rev"
CHANGED_KEY = "st:changed"
EPOCH_KEY = "st:epoch"
JOBS_KEY = "st:jobs"
OBSERVATIONS_KEY = "st:observations"
OOMS_KEY = "st:ooms"  # earlier versions' set of every OOM kill seen (read, never written)
OOM_SEEN_PREFIX = "st:oom:"  # + the kill's event: counted (expires)
OOM_SEEN_TTL_S = 7 * 86400  # a kill is re-read from its pod's status while the pod lives
WAITING_KEY = "st:waiting"
OBSERVATIONS_MAXLEN = 100_000
DECISIONS_KEY = "st:decisions"
POSTERS_GROUP = "event-posters"  # the monitors' consumer group on the decision log
DECISIONS_MAXLEN = 2_000
# Repeated decisions (waiting, held) one namespace may add to the log per window: a tenth
# of it per minute, under what the Event posters drain (EXTENDER_EVENT_RATE, 5/s).
TOLD_QUOTA, TOLD_QUOTA_WINDOW_S = DECISIONS_MAXLEN // 10, 60
TOLD_QUOTA_PREFIX = "st:told-quota:"  # + namespace: its repeated decisions this window
FLOOR_JOBS_KEY = "st:floor-jobs"
HANDOVERS_KEY = "st:handovers"
INTERFERENCE_KEY = "st:interference"  # GPU type -> learned alpha (the monitor's fit)
OWNER_RUNS_KEY = "st:owner-runs"  # earlier versions' hash of every owner's runs
OWNER_RUNS_PREFIX = "st:owner-runs:"  # + namespace/kind/name: that owner's runs and seconds
OWNER_RUNS_TTL_S = 30 * 86400  # an owner with no finished run for this long is forgotten


def gpu_key(node: str, index: int) -> str:
    return f"st:gpu:{node}:{index}"


def node_queue_prefix(node: str) -> str:
    """What every GPU queue key of `node` starts with (node names hold no ':')."""
    return f"st:gpu:{node}:"


def job_key(uid: str) -> str:
    return f"st:job:{uid}"


def demand_key(uid: str) -> str:
    return f"st:demand:{uid}"


def floor_kills_key(job_type: str) -> str:
    return f"st:floor-kills:{job_type}"


def floors_key(model: str, task: str, batch: int) -> str:
    """The floors hash of one job (`FLOORS`: fields per GPU type and namespace)."""
    return f"st:floor:{model}|{task}|{batch}"

