"""Settings from the environment: the only place that reads `os.environ`.

Environment variables (the manifests in k8s/ use exactly these names):

    REDIS_URL                      Redis to share state in (redis://host:6379/0, rediss://,
                                   unix:///path). Unset: an embedded redis-server with AOF
                                   in EXTENDER_STATE_DIR/redis, shared by every process of
                                   the replica (workers, node watcher, monitor, CLIs).
    REDIS_SENTINELS                instead of REDIS_URL: Redis Sentinel's addresses
                                   (host:port,host:port); every process reaches the master
                                   they name and follows a failover (k8s/redis-ha)
    REDIS_SENTINEL_MASTER          the master's name in the sentinels' configuration
                                   (default mymaster); REDIS_SENTINEL_DB its database (0)
    REDIS_PASSWORD                 with REDIS_SENTINELS: the master's and replicas'
                                   password; REDIS_SENTINEL_PASSWORD the sentinels' own
    EXTENDER_REDIS_REPLICAS        a bind is acknowledged once its reservation is on every
                                   replica acknowledging within 2 s (and one that left the
                                   master in the last 10 s), and at least this many (WAIT;
                                   default 1 with REDIS_SENTINELS, else 0); short of them it
                                   is released and refused as retriable
    EXTENDER_REDIS_REPLICA_WAIT_MS how long WAIT waits for them (default 500)
    KUBECONFIG                     cluster access outside a pod (in a pod: service account)
    EXTENDER_STATE_DIR             embedded Redis data directory (default ./var)
    EXTENDER_BIND                  api (create the Binding through the API, default) or
                                   record (reserve only; replay and tests)
    EXTENDER_COLLOCATION_LIMIT     max jobs per GPU for types not listed below (default 4)
    EXTENDER_COLLOCATION_LIMITS    per type, e.g. "K80=2,RTX-3090=6"
    EXTENDER_INTERFERENCE_ALPHA    slowdown per extra job on a GPU (default 0.47, Gavel fit):
                                   the prior of the per-GPU-type alphas the monitor learns
    EXTENDER_INTERFERENCE_LEARN    1 (default): decisions play a GPU type forward at the
                                   alpha the monitor learned from its observed runs, once
                                   it has (`extender.core.interference`); 0: the alpha
                                   above everywhere
    EXTENDER_INTERFERENCE_PRIORS   1 (default, unless EXTENDER_INTERFERENCE_ALPHA is set): a
                                   GPU type the monitor has not learned yet is priced at its
                                   architecture's measured slowdown (Gavel's K80 and V100
                                   pairs, the H200's runs; between them by release year:
                                   `extender.core.interference.prior_alpha`); 0: the alpha
                                   above for every type
    EXTENDER_TIME_LEARN            1 (default): a model's predicted seconds on a GPU type are
                                   corrected by how far observed runs of its job type (else
                                   model, else task) on that type were off, its owner's own
                                   runs first, other owners' within 1.5x
                                   (`extender.core.time_bias`, the monitor's fit); 0: the
                                   estimate as it is
    EXTENDER_RESERVATION_TTL_S     a reservation bind does not confirm expires after this
                                   (default 120)
    EXTENDER_DEMAND_TTL_S          filter's demand record lifetime (default 900: bind follows
                                   filter at once, or after PreBind's volume binding, 600 s
                                   at most; a waiting pod's next filter refreshes it)
    EXTENDER_MAX_BODY_BYTES        request size limit (default 33554432)
    EXTENDER_REDIS_TIMEOUT_S       Redis socket timeout (default 1.0)
    EXTENDER_ESTIMATOR_DESIGN      trained design to load: ours (default) or paper-rfr
    EXTENDER_SCORING               the scoring policy, a name registered in
                                   extender/policies/__init__.py (default keeping-up:
                                   while pods wait, when the GPU would be empty again
                                   with the job on it, its jobs played forward (drain);
                                   while none waits, sharing beside an idle GPU priced
                                   as lasting; each policy's module docstring says what
                                   it charges)
    EXTENDER_TIE_BREAK             among nodes the policy prices alike (e.g. jobs with no
                                   predicted time): fragmentation (default: FGD's score of
                                   the GPU share the job leaves stranded for the mix of
                                   jobs the cluster holds, extender/core/fragmentation.py,
                                   then the least share of a GPU left) or best-fit (the
                                   least memory left); nodes alike in both keep the top
                                   score together (kube-scheduler picks one at random).
                                   Under fragmentation, a pod asking no GPU (sent when
                                   the extender is registered without managedResources)
                                   is scored by what its CPU strands
    EXTENDER_HOLD_FOR              waiting pods (fit nowhere, oldest first) that each get
                                   the GPU where they fit soonest held for them: others go
                                   there only if both fit (default 1, the queue head as in
                                   EASY backfilling; 0 disables holds)
    EXTENDER_HOLD_AFTER_S          a pod holds a GPU only once it has waited this long
                                   (default 900: three kube-scheduler retry periods, so
                                   the guard stops starvation without becoming the queue
                                   discipline of a busy cluster; like Slurm's
                                   bf_min_age_reserve)
    EXTENDER_SHORT_FIRST           a waiting pod predicted to run this many times less
                                   than the pod being placed gets the GPU where it fits
                                   soonest held at once, whatever its age (shortest job
                                   first; default 4, 0 disables, as EXTENDER_HOLD_FOR=0
                                   does; a pod that has waited EXTENDER_HOLD_AFTER_S no
                                   longer yields)
    EXTENDER_WAIT_FOR_FASTER       a pod that fits now waits instead when a GPU that frees
                                   later would finish it more than this many times
                                   sooner (jobs played forward; extender/core/filtering/patience.py);
                                   default 1.5, 0 disables; needs EXTENDER_HOLD_FOR; a pod
                                   that has waited EXTENDER_HOLD_AFTER_S takes what fits
    EXTENDER_SHARE_IF_PAYS         1 (default): a pod that fits now only beside running
                                   jobs waits for a GPU of its own when that costs less
                                   than sharing costs it and its neighbours
                                   (extender/core/filtering/sharing.py); needs EXTENDER_HOLD_FOR;
                                   0 disables
    EXTENDER_WAIT_TTL_S            a waiting pod not filtered again for this long stops
                                   holding (default 600; kube-scheduler retries refused
                                   pods at least every 5 minutes)
    EXTENDER_DECISION_REPEAT_S     a pod is told the same decision (waiting, a GPU held for
                                   it) at most once in this many seconds (default 600)
    EXTENDER_PRIORITIZE_REUSE_S    prioritize of the pod this worker filtered last, within
                                   this many seconds, scores on the queues that filter read
                                   (no Redis round trip; default 1; 0: always read again)
    EXTENDER_PRICE_AHEAD           1 (default): once filter has answered, the worker prices
                                   the nodes that passed for prioritize (kube-scheduler runs
                                   its own score plugins meanwhile); 0: prioritize prices
                                   them when asked (a scheduler configured without
                                   prioritizeVerb would never use the work); off too
                                   when EXTENDER_PRIORITIZE_REUSE_S is 0
    EXTENDER_EVENT_RATE            Events the monitor posts per second at most (default 5;
                                   EXTENDER_EVENT_BURST at once, default 25); more are
                                   dropped and counted (schedtune_events_total)
    EXTENDER_NODE_AGENT            what hands a pod the GPU we chose on its node: none
                                   (default: NVIDIA's device plugin, which gives a pod
                                   asking nvidia.com/gpu: 1 a whole GPU, or under
                                   time-slicing a replica of the kubelet's choosing; our
                                   choice is a reservation only) or hami (HAMi's device
                                   plugin: the node watcher reads its device register, bind
                                   writes its allocation annotations and takes its node
                                   lock, the monitor follows its answer; extender/wire/hami.py)
                                   or volcano (Volcano's GPU-share device plugin: bind writes
                                   the GPU indices it reserved; extender/wire/gpushare.py)
    EXTENDER_AGENT_TIMEOUT_S       monitor: how long a node agent may take to answer a
                                   hand-over before the reservation is released (default
                                   300, HAMi's own node lock timeout)
    EXTENDER_GANG_PLAN_TTL_S       a gang's plan (every member's GPUs, reserved at once when
                                   its first member is filtered) is released whole unless
                                   every member binds within this (default 360: the in-tree
                                   GangScheduling Permit waits 5 minutes)
    EXTENDER_GANG_NETWORK_GBPS     each node's network link in Gb/s, as the ring all-reduce
                                   of a gang spread over nodes uses it (default 25: a common
                                   data-centre NIC; extender/core/gang_plan.py)
    EXTENDER_NODE_WATCH            1 (default) to watch nodes through the API when a cluster
                                   is reachable, 0 to rely on request bodies only
    EXTENDER_DECLARED_DEFAULT_S    seconds a declared-memory pod is expected to run when it
                                   says nothing (schedtune.io/expected-seconds) and its owner
                                   has no finished run yet (default 3600)
    EXTENDER_MODELS_DIR            the trained artefacts to load (default: the package's
                                   profiles/models)
    EXTENDER_LOG_LEVEL             INFO (default), DEBUG, WARNING, ...
    EXTENDER_BIND_ADDRESS          gunicorn bind address (default 127.0.0.1:8888: loopback
                                   only; k8s/extender.yaml sets 0.0.0.0:8888)
    EXTENDER_WORKERS               gunicorn workers (default 2)
    EXTENDER_TLS_CERT_FILE, EXTENDER_TLS_KEY_FILE   serve HTTPS when both are set
    EXTENDER_TLS_CLIENT_CA_FILE    with HTTPS: require a client certificate signed by this CA
                                   (mutual TLS: kube-scheduler's tlsConfig presents one)
    EXTENDER_AUTH_TOKEN_FILE       a file holding a bearer token every verb then requires
                                   (`Authorization: Bearer <token>`); unset: no token
    EXTENDER_SIGNING_KEY_FILE      a file holding the key (>= 16 bytes) that signs the
                                   reservation written on a pod at bind; the monitor adopts
                                   only reservations it can verify (unset: it recomputes them)
    EXTENDER_SCHEDULER_NAME        our scheduler's name: the monitor adopts only pods placed
                                   by it (default schedtune-scheduler)
    EXTENDER_WORKER_CONNECTIONS    concurrent connections per gunicorn (gevent) worker
                                   (default 1000: slow clients wait, others are served)
    EXTENDER_FLOOR_RAISES          monitor: GPU OOM kills of one job type that raise one
                                   namespace's floor per window (default 3; more kills
                                   are counted and warned of, and raise nothing; a run of
                                   the type that succeeds there starts the count again)
    EXTENDER_FLOOR_WINDOW_S        monitor: that window, and how long a kill counts towards
                                   everyone's floor (which needs kills from two
                                   namespaces; default 86400)
    EXTENDER_RECONCILE_S           monitor: full pod listing + reconcile period (default 300)
    EXTENDER_MONITOR_PORT          monitor: Prometheus metrics / liveness port (default 9100)
    PROMETHEUS_MULTIPROC_DIR       set by gunicorn.conf.py for multi-process metrics
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from estimator import portable
from estimator.catalogue import CATALOGUE
from extender.env_values import (
    SettingsError,
    choice,
    directory,
    number,
    redis_target,
    secret,
    text_secret,
)  # fmt: skip
from extender.model import UNKNOWN_TYPE, Limits
from extender.policies import DEFAULT_POLICY, POLICIES, ScoringPolicy, make_policy

BIND_MODES = ("api", "record")
NODE_AGENTS = ("none", "hami", "volcano")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL", "NOTSET")
MAX_COLLOCATION = 1024  # pods per GPU
TIE_BREAKS = ("best-fit", "fragmentation")
GPU_TYPES = frozenset(CATALOGUE) | {UNKNOWN_TYPE}


def embedded_redis_url(directory: Path) -> str:
    """The URL of the embedded redis-server kept in `directory` (its unix socket)."""
    return f"unix://{directory / 'redis.sock'}?db=0"


@dataclass(frozen=True)
class Settings:
    redis_url: str | None = None
    kubeconfig: str | None = None
    state_dir: Path = Path("var")
    bind_mode: str = "api"
    collocation: Limits = field(default_factory=lambda: Limits(4, {}))
    interference_alpha: float = 0.47
    interference_learn: bool = True
    interference_priors: bool = False  # from the environment: on unless an alpha is given
    time_learn: bool = True
    reservation_ttl_s: float = 120.0
    demand_ttl_s: int = 900
    max_body_bytes: int = 32 * 1024 * 1024
    redis_timeout_s: float = 1.0
    redis_replicas: int = 0  # replicas an acknowledged bind's writes reach first (WAIT)
    redis_replica_wait_ms: int = 500
    estimator_design: str = "ours"
    scoring: str = DEFAULT_POLICY
    tie_break: str = "fragmentation"
    hold_for: int = 1
    hold_after_s: float = 900.0
    short_first: float = 4.0
    wait_for_faster: float = 1.5
    share_if_pays: bool = False  # on from the environment (from_env); off for tests' cases
    wait_ttl_s: float = 600.0
    decision_repeat_s: int = 600
    prioritize_reuse_s: float = 1.0
    price_ahead: bool = True
    declared_default_s: float = 3600.0
    models_dir: Path = portable.MODELS_DIR
    event_rate: float = 5.0
    event_burst: int = 25
    node_watch: bool = True
    node_agent: str = "none"
    agent_timeout_s: float = 300.0
    gang_plan_ttl_s: float = 360.0
    gang_network_gbps: float = 25.0
    log_level: str = "INFO"
    bind_address: str = "127.0.0.1:8888"
    workers: int = 2
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_client_ca_file: str | None = None
    auth_token: str | None = field(default=None, repr=False)
    signing_key: bytes | None = field(default=None, repr=False)
    scheduler_name: str = "schedtune-scheduler"
    worker_connections: int = 1000
    floor_raises: int = 3
    floor_window_s: float = 86400.0
    reconcile_s: float = 300.0
    monitor_port: int = 9100

    @cached_property
    def policy(self) -> ScoringPolicy:
        """The scoring policy `scoring` names, at the configured collocation slowdown."""
        return make_policy(self.scoring, self.interference_alpha)

    @property
    def embedded_redis_dir(self) -> Path | None:
        """The embedded redis-server's directory (data, socket, log); None with REDIS_URL."""
        return None if self.redis_url else (self.state_dir / "redis").resolve()

    @property
    def store_url(self) -> str:
        """The one Redis every process asks for: REDIS_URL, else the embedded server's socket."""
        return self.redis_url or embedded_redis_url(self.state_dir.resolve() / "redis")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Validate once at startup; `SettingsError` names the variable."""
        get = env.get
        settings = cls(
            redis_url=redis_target(env),
            redis_replicas=number(env, "EXTENDER_REDIS_REPLICAS",
                                   1 if get("REDIS_SENTINELS") else 0, int, 0, 16),
            redis_replica_wait_ms=number(env, "EXTENDER_REDIS_REPLICA_WAIT_MS", 500, int, 1,
                                          60_000),
            kubeconfig=get("KUBECONFIG") or None,
            state_dir=Path(get("EXTENDER_STATE_DIR", "var")),
            bind_mode=choice(env, "EXTENDER_BIND", "api", BIND_MODES),
            node_agent=choice(env, "EXTENDER_NODE_AGENT", "none", NODE_AGENTS),
            agent_timeout_s=number(env, "EXTENDER_AGENT_TIMEOUT_S", 300.0, float, 1, 86400),
            gang_plan_ttl_s=number(env, "EXTENDER_GANG_PLAN_TTL_S", 360.0, float, 5, 86400),
            gang_network_gbps=number(env, "EXTENDER_GANG_NETWORK_GBPS", 25.0, float, 0.1,
                                      10_000),
            collocation=Limits(number(env, "EXTENDER_COLLOCATION_LIMIT", 4, int, 1,
                                       MAX_COLLOCATION),
                               _limits(get("EXTENDER_COLLOCATION_LIMITS", ""))),
            interference_alpha=number(env, "EXTENDER_INTERFERENCE_ALPHA", 0.47, float, 0, 10),
            interference_learn=choice(env, "EXTENDER_INTERFERENCE_LEARN", "1",
                                       ("0", "1")) == "1",
            time_learn=choice(env, "EXTENDER_TIME_LEARN", "1", ("0", "1")) == "1",
            interference_priors=choice(
                env, "EXTENDER_INTERFERENCE_PRIORS",
                "0" if "EXTENDER_INTERFERENCE_ALPHA" in env else "1", ("0", "1")) == "1",
            reservation_ttl_s=number(env, "EXTENDER_RESERVATION_TTL_S", 120.0, float, 1, 86400),
            demand_ttl_s=number(env, "EXTENDER_DEMAND_TTL_S", 900, int, 10, 7 * 86400),
            max_body_bytes=number(env, "EXTENDER_MAX_BODY_BYTES", 32 << 20, int, 1024, 1 << 30),
            redis_timeout_s=number(env, "EXTENDER_REDIS_TIMEOUT_S", 1.0, float, 0.05, 60),
            estimator_design=choice(env, "EXTENDER_ESTIMATOR_DESIGN", "ours",
                                     ("ours", "paper-rfr")),
            scoring=choice(env, "EXTENDER_SCORING", DEFAULT_POLICY, tuple(POLICIES)),
            tie_break=choice(env, "EXTENDER_TIE_BREAK", "fragmentation", TIE_BREAKS),
            hold_for=number(env, "EXTENDER_HOLD_FOR", 1, int, 0, 64),
            hold_after_s=number(env, "EXTENDER_HOLD_AFTER_S", 900.0, float, 0, 7 * 86400),
            short_first=number(env, "EXTENDER_SHORT_FIRST", 4.0, float, 0, 1000),
            wait_for_faster=number(env, "EXTENDER_WAIT_FOR_FASTER", 1.5, float, 0, 1000),
            share_if_pays=choice(env, "EXTENDER_SHARE_IF_PAYS", "1", ("0", "1")) == "1",
            wait_ttl_s=number(env, "EXTENDER_WAIT_TTL_S", 600.0, float, 10, 86400),
            decision_repeat_s=number(env, "EXTENDER_DECISION_REPEAT_S", 600, int, 1, 86400),
            prioritize_reuse_s=number(env, "EXTENDER_PRIORITIZE_REUSE_S", 1.0, float, 0, 60),
            price_ahead=choice(env, "EXTENDER_PRICE_AHEAD", "1", ("0", "1")) == "1",
            declared_default_s=number(env, "EXTENDER_DECLARED_DEFAULT_S", 3600.0, float, 1,
                                       10**7),
            models_dir=directory(env, "EXTENDER_MODELS_DIR") or portable.MODELS_DIR,
            event_rate=number(env, "EXTENDER_EVENT_RATE", 5.0, float, 0.01, 1000),
            event_burst=number(env, "EXTENDER_EVENT_BURST", 25, int, 1, 10000),
            node_watch=choice(env, "EXTENDER_NODE_WATCH", "1", ("0", "1")) == "1",
            log_level=choice(env, "EXTENDER_LOG_LEVEL", "INFO", LOG_LEVELS, str.upper),
            bind_address=get("EXTENDER_BIND_ADDRESS", "127.0.0.1:8888"),
            workers=number(env, "EXTENDER_WORKERS", 2, int, 1, 64),
            tls_cert_file=get("EXTENDER_TLS_CERT_FILE") or None,
            tls_key_file=get("EXTENDER_TLS_KEY_FILE") or None,
            tls_client_ca_file=get("EXTENDER_TLS_CLIENT_CA_FILE") or None,
            auth_token=text_secret(env, "EXTENDER_AUTH_TOKEN_FILE", 16) or None,
            signing_key=secret(env, "EXTENDER_SIGNING_KEY_FILE", 16) or None,
            scheduler_name=get("EXTENDER_SCHEDULER_NAME", "schedtune-scheduler"),
            worker_connections=number(env, "EXTENDER_WORKER_CONNECTIONS", 1000, int, 10,
                                       100_000),
            floor_raises=number(env, "EXTENDER_FLOOR_RAISES", 3, int, 1, 1000),
            floor_window_s=number(env, "EXTENDER_FLOOR_WINDOW_S", 86400.0, float, 60,
                                   365 * 86400),
            reconcile_s=number(env, "EXTENDER_RECONCILE_S", 300.0, float, 5, 86400),
            monitor_port=number(env, "EXTENDER_MONITOR_PORT", 9100, int, 1, 65535),
        )  # fmt: skip
        if 0 < settings.short_first < 1:
            raise SettingsError(f"EXTENDER_SHORT_FIRST={env['EXTENDER_SHORT_FIRST']!r}: 0 (off) "
                                "or how many times shorter a waiter must be, at least 1")
        if 0 < settings.wait_for_faster <= 1:
            raise SettingsError(f"EXTENDER_WAIT_FOR_FASTER={env['EXTENDER_WAIT_FOR_FASTER']!r}: "
                                "0 (off) or how many times sooner the faster GPU must finish "
                                "the job, above 1")
        if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
            raise SettingsError("EXTENDER_TLS_CERT_FILE and EXTENDER_TLS_KEY_FILE go together")
        if settings.tls_client_ca_file and not settings.tls_cert_file:
            raise SettingsError("EXTENDER_TLS_CLIENT_CA_FILE needs EXTENDER_TLS_CERT_FILE and "
                                "EXTENDER_TLS_KEY_FILE (client certificates need HTTPS)")
        return settings


def _limits(spec: str) -> dict[str, int]:
    """Per-GPU-type limits, each 1..`MAX_COLLOCATION`, for GPU types of the catalogue."""
    limits = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name or not (value.isascii() and value.isdigit()) \
                or not 1 <= int(value) <= MAX_COLLOCATION:
            raise SettingsError(f"EXTENDER_COLLOCATION_LIMITS item {item!r}: expected TYPE=N, "
                                f"N in 1..{MAX_COLLOCATION}")
        if name not in GPU_TYPES:
            raise SettingsError(f"EXTENDER_COLLOCATION_LIMITS item {item!r}: {name!r} is no GPU "
                                f"type of the catalogue ({', '.join(sorted(GPU_TYPES))})")
        limits[name] = int(value)
    return limits
