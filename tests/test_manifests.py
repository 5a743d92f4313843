"""The shipped manifests and scheduler configurations: they parse, use the v1 field names and
types, and keep the security invariants (mutual TLS, NetworkPolicies, Redis password and
eviction policy, one least-privilege ServiceAccount per process, generated secrets)."""

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml

from replay.fgd_extender import PROFILE_SCORES_OFF

K8S = Path(__file__).resolve().parent.parent / "k8s"
NAMESPACE = "schedtune"
EXTENDER_FIELDS = {"urlPrefix": str, "filterVerb": str, "prioritizeVerb": str, "bindVerb": str,
                   "weight": int, "enableHTTPS": bool, "tlsConfig": dict,
                   "nodeCacheCapable": bool, "httpTimeout": str, "ignorable": bool,
                   "managedResources": list}
TLS_CONFIG_FIELDS = {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData",
                     "keyData", "caData"}  # kube-scheduler's ExtenderTLSConfig
# Applied on their own, not by `kubectl apply -k k8s/` (the kustomization's comment says so).
NOT_IN_KUSTOMIZATION = {"kustomization.yaml", "scheduler-config.yaml",
                        "volcano-scheduler.conf.yaml", "cert-manager.yaml"}
# (API group, resource, verb) each process's code calls, nothing more.
GRANTS = {
    "schedtune-extender": {("", "pods", "get"), ("", "pods", "patch"),
                           ("", "pods/binding", "create"),
                           *{(group, "podgroups", "get") for group in (
                               "scheduling.k8s.io", "scheduling.volcano.sh",
                               "scheduling.x-k8s.io")}},
    "schedtune-monitor": {("", "pods", "get"), ("", "pods", "list"), ("", "pods", "watch"),
                          ("", "pods", "patch"),
                          ("", "events", "create")},
    "schedtune-node-watch": {("", "nodes", "list"), ("", "nodes", "watch")},
}
DASHBOARD_CONFIG_MAP = "schedtune-grafana-dashboard"  # for Grafana's dashboard sidecar
COMMANDS = {"schedtune-extender": "serve", "schedtune-monitor": "monitor",
            "schedtune-node-watch": "node-watch"}


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@cache  # read-only: parsed once for the module
def _all_documents() -> dict[str, list[dict]]:
    return {p.relative_to(K8S).as_posix(): _documents(p) for p in sorted(K8S.rglob("*.yaml"))}


def _pod_specs(doc: dict) -> list[dict]:
    if doc.get("kind") in ("Deployment", "StatefulSet", "Job"):
        return [doc["spec"]["template"]["spec"]]
    return []


@cache
def _workloads() -> dict[str, dict]:
    """Every Deployment and StatefulSet that `kubectl apply -k k8s/` creates, by name (the
    files of k8s/ itself: examples/ and the hami/ component's patches are not)."""
    return {d["metadata"]["name"]: d for name, docs in _all_documents().items()
            if "/" not in name for d in docs
            if d.get("kind") in ("Deployment", "StatefulSet")}


def _spec(name: str) -> dict:
    (spec,) = _pod_specs(_workloads()[name])
    return spec


def _container(name: str) -> dict:
    (container,) = _spec(name)["containers"]
    return container


def _env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def _secret_of_file(spec: dict, container: dict, path: str) -> tuple[str, str]:
    """(Secret name, key) behind a file path in `container`: its mount must be a Secret."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container["volumeMounts"]:
        directory = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(directory):
            assert mount.get("readOnly") is True, mount
            return volumes[mount["name"]]["secret"]["secretName"], path[len(directory):]
    raise AssertionError(f"{path} is not in a mounted volume")


def _scheduler_config() -> dict:
    return yaml.safe_load((K8S / "scheduler-config.yaml").read_text())


def _kustomization() -> dict:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def _generated_secrets() -> dict[str, dict[str, str]]:
    """secretGenerator: Secret name -> {key: file under k8s/}."""
    return {g["name"]: dict(f.split("=", 1) for f in g["files"])
            for g in _kustomization()["secretGenerator"]}


def _generated_config_maps() -> dict[str, list[str]]:
    """configMapGenerator: ConfigMap name -> its files under k8s/."""
    return {g["name"]: g["files"] for g in _kustomization()["configMapGenerator"]}


def _policies() -> dict[str, dict]:
    return {d["metadata"]["name"]: d["spec"] for d in _documents(K8S / "network-policy.yaml")}


def _labels(workload: str) -> dict[str, str]:
    return _workloads()[workload]["spec"]["template"]["metadata"]["labels"]


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions with In) against a pod's labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def _admitted(policy: dict) -> tuple[set[str], set[int]]:
    """The workloads of this namespace a policy admits, and the ports."""
    peers = [p for rule in policy["ingress"] for p in rule["from"]]
    ports = {p["port"] for rule in policy["ingress"] for p in rule["ports"]}
    assert all(p["protocol"] == "TCP" for rule in policy["ingress"] for p in rule["ports"])
    local = {name for name in _workloads() for peer in peers
             if "namespaceSelector" not in peer and _selects(peer["podSelector"], _labels(name))}
    return local, ports


# --- scheduler configurations ---------------------------------------------------------------

def test_kube_scheduler_configuration_v1_over_mutual_tls() -> None:
    config = _scheduler_config()
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["profiles"][0]["schedulerName"] == "schedtune-scheduler"
    (extender,) = config["extenders"]
    assert set(extender) <= set(EXTENDER_FIELDS)
    for key, value in extender.items():
        assert isinstance(value, EXTENDER_FIELDS[key]), key
    assert 1 <= extender["weight"] <= 100  # the scheduler rejects weights outside (0, 100]
    # The openb replay plays this profile: no in-tree scorer of CPU and memory.
    disabled = config["profiles"][0]["plugins"]["score"]["disabled"]
    assert tuple(plugin["name"] for plugin in disabled) == PROFILE_SCORES_OFF
    assert extender["nodeCacheCapable"] is True
    for resource in extender["managedResources"]:
        assert set(resource) == {"name", "ignoredByScheduler"}
    # HTTPS, the server verified against our CA, a client certificate presented.
    assert extender["urlPrefix"].startswith("https://") and extender["enableHTTPS"] is True
    tls = extender["tlsConfig"]
    assert set(tls) <= TLS_CONFIG_FIELDS and not tls.get("insecure", False)
    assert {"certFile", "keyFile", "caFile"} <= set(tls)
    spec, container = _spec("schedtune-scheduler"), _container("schedtune-scheduler")
    files = {_secret_of_file(spec, container, tls[k]) for k in ("certFile", "keyFile", "caFile")}
    assert files == {("schedtune-scheduler-tls", "tls.crt"), ("schedtune-scheduler-tls", "tls.key"),
                     ("schedtune-scheduler-tls", "ca.crt")}
    config_mounts = [m for m in container["volumeMounts"] if m["name"] == "config"]
    assert container["command"][1] == (
        f"--config={config_mounts[0]['mountPath']}/scheduler-config.yaml")


def test_volcano_snippet_names_our_verbs() -> None:
    config = yaml.safe_load((K8S / "volcano-scheduler.conf.yaml").read_text())
    plugins = [p for tier in config["tiers"] for p in tier["plugins"]]
    (ext,) = [p for p in plugins if p["name"] == "extender"]
    args = ext["arguments"]
    assert args["extender.urlPrefix"].endswith("/volcano")
    verbs = {args[k] for k in ("extender.predicateVerb", "extender.prioritizeVerb",
                               "extender.allocateFuncVerb", "extender.deallocateFuncVerb",
                               "extender.jobReadyVerb")}
    assert verbs == {"predicate", "prioritize", "allocate", "deallocate", "jobReady"}
    served = {r.rule.removeprefix("/volcano/") for r in _volcano_routes()}
    assert verbs <= served
    # Volcano sends no client certificate: it goes through a TLS sidecar on loopback.
    assert args["extender.urlPrefix"].startswith("http://127.0.0.1:")


def _volcano_routes() -> list:
    from flask import Flask  # noqa: PLC0415

    from extender.web import routes_volcano  # noqa: PLC0415

    app = Flask("routes")
    app.register_blueprint(routes_volcano.bp)
    return [r for r in app.url_map.iter_rules() if r.rule.startswith("/volcano/")]


# --- kustomization and generated secrets ----------------------------------------------------

def test_every_manifest_parses_and_kustomization_lists_every_file() -> None:
    docs = _all_documents()
    for name, documents in docs.items():
        if name not in ("volcano-scheduler.conf.yaml", "kustomization.yaml"):
            assert all(d.get("apiVersion") and d.get("kind") for d in documents), name
    kustomization = _kustomization()
    top_level = {name for name in docs if "/" not in name}
    assert set(kustomization["resources"]) == top_level - NOT_IN_KUSTOMIZATION
    generated = _generated_config_maps()
    assert generated == {"schedtune-scheduler-config": ["scheduler-config.yaml"],
                         DASHBOARD_CONFIG_MAP: ["grafana-dashboard.json"]}
    mounted = [v["configMap"]["name"] for v in _spec("schedtune-scheduler")["volumes"]
               if "configMap" in v]
    assert mounted == ["schedtune-scheduler-config"]
    # Every Secret a workload uses is generated (and nothing else is).
    used = {v["secret"]["secretName"] for name in _workloads() for v in
            _spec(name).get("volumes", []) if "secret" in v}
    used |= {e["valueFrom"]["secretKeyRef"]["name"] for name in _workloads()
             for c in _spec(name)["containers"] for e in c.get("env", []) if "valueFrom" in e}
    assert used == set(_generated_secrets())
    assert all(g["namespace"] == NAMESPACE for g in kustomization["secretGenerator"])


def test_secret_files_are_never_committed() -> None:
    ignore = (K8S / "secrets" / ".gitignore").read_text().split()
    assert "*" in ignore and "!.gitignore" in ignore
    for files in _generated_secrets().values():
        assert all(f.startswith("secrets/") for f in files.values())


def _make_secrets(directory: Path) -> dict[str, bytes]:
    if not (shutil.which("openssl") and shutil.which("bash")):
        pytest.skip("k8s/make-secrets.sh needs bash and the openssl CLI")
    subprocess.run(["bash", str(K8S / "make-secrets.sh"), str(directory)], check=True,
                   capture_output=True, timeout=60)
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_make_secrets_writes_what_the_generators_read(tmp_path: Path) -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    written = _make_secrets(tmp_path)
    wanted = {Path(f).name for files in _generated_secrets().values() for f in files.values()}
    assert wanted <= set(written) and "ca.key" in written
    assert _make_secrets(tmp_path) == written  # a second run changes nothing
    assert all(os.stat(tmp_path / name).st_mode & 0o077 == 0 for name in written)

    ca = x509.load_pem_x509_certificate(written["ca.crt"])
    service = {d["kind"]: d for d in _documents(K8S / "extender.yaml")}["Service"]["metadata"]
    fqdn = f"{service['name']}.{service['namespace']}.svc"
    for name, usages in (("extender", {ExtendedKeyUsageOID.SERVER_AUTH,
                                       ExtendedKeyUsageOID.CLIENT_AUTH}),
                         ("scheduler", {ExtendedKeyUsageOID.CLIENT_AUTH}),
                         ("volcano", {ExtendedKeyUsageOID.CLIENT_AUTH})):
        cert = x509.load_pem_x509_certificate(written[f"{name}.crt"])
        cert.verify_directly_issued_by(ca)
        assert set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == usages
    extender = x509.load_pem_x509_certificate(written["extender.crt"])
    names = extender.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {fqdn, "localhost"} <= set(names.get_values_for_type(x509.DNSName))
    # REDIS_URL carries exactly the password Redis requires, for the Service's host and port.
    password = written["redis-password"].decode()
    redis_service = {d["kind"]: d for d in _documents(K8S / "redis.yaml")}["Service"]
    assert len(password) == 64 and password.isalnum()
    assert written["redis-url"].decode() == (
        f"redis://:{password}@{redis_service['metadata']['name']}.{NAMESPACE}.svc:"
        f"{redis_service['spec']['ports'][0]['port']}/0")
    assert len(written["signing-key"].strip()) >= 16  # what EXTENDER_SIGNING_KEY_FILE needs


def test_kubectl_kustomize_builds_with_generated_secrets(tmp_path: Path) -> None:
    """`kubectl apply -k k8s/` after make-secrets.sh: every reference resolves to a generated
    (hash-suffixed) object of the build."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed")
    copy = tmp_path / "k8s"
    shutil.copytree(K8S, copy, ignore=shutil.ignore_patterns("secrets"))
    _make_secrets(copy / "secrets")
    built = subprocess.run(["kubectl", "kustomize", str(copy)], capture_output=True, text=True,
                           timeout=60)
    assert built.returncode == 0, built.stderr
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for doc in docs:
        for spec in _pod_specs(doc):
            for volume in spec.get("volumes", []):
                if "secret" in volume:
                    assert ("Secret", volume["secret"]["secretName"]) in names
                if "configMap" in volume:
                    assert ("ConfigMap", volume["configMap"]["name"]) in names
            for container in spec["containers"]:
                for env in container.get("env", []):
                    if "valueFrom" in env:
                        assert ("Secret", env["valueFrom"]["secretKeyRef"]["name"]) in names
    # The dashboard for Grafana's sidecar: its label, one stable name, the JSON as written.
    (dashboard,) = [d for d in docs if d["kind"] == "ConfigMap"
                    and d["metadata"]["name"] == DASHBOARD_CONFIG_MAP]
    assert dashboard["metadata"]["labels"] == {"grafana_dashboard": "1"}
    assert dashboard["metadata"]["namespace"] == NAMESPACE
    written = (K8S / "grafana-dashboard.json").read_text()
    assert dashboard["data"] == {"grafana-dashboard.json": written}


def test_cert_manager_issues_the_secrets_the_pods_mount() -> None:
    certificates = {d["spec"]["secretName"]: d["spec"] for d in
                    _documents(K8S / "cert-manager.yaml") if d["kind"] == "Certificate"}
    tls_secrets = {name for name, files in _generated_secrets().items() if "tls.crt" in files}
    assert tls_secrets <= set(certificates)
    extender, scheduler = certificates["schedtune-extender-tls"], certificates[
        "schedtune-scheduler-tls"]
    assert {"server auth", "client auth"} <= set(extender["usages"])
    assert "client auth" in scheduler["usages"] and "server auth" not in scheduler["usages"]
    assert "schedtune-extender.schedtune.svc" in extender["dnsNames"]
    issuer = extender["issuerRef"]["name"]
    assert scheduler["issuerRef"]["name"] == issuer and certificates[issuer]["isCA"] is True


# --- workloads ------------------------------------------------------------------------------

def test_workloads_run_non_root_read_only_with_probes_and_requests() -> None:
    for name, workload in _workloads().items():
        for spec in _pod_specs(workload):
            assert spec["securityContext"]["runAsNonRoot"] is True, name
            for container in spec["containers"]:
                ctx = container["securityContext"]
                assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
                assert ctx["capabilities"]["drop"] == ["ALL"]
                assert container["resources"]["requests"], name
                # The node watcher listens on nothing: it retries failures itself and exits
                # on what it cannot retry, and the container restarts.
                assert "livenessProbe" in container or name == "schedtune-node-watch", name


def test_our_processes_use_known_settings_and_their_commands() -> None:
    from extender import settings as settings_module
    from extender.settings import Settings
    from scripts.cli import COMMANDS as CLI

    for name, command in COMMANDS.items():
        container = _container(name)
        assert container["command"] == ["schedtune", command]
        env = _env(container)
        for variable in env:
            assert variable in settings_module.__doc__, (name, variable)
        values = {k: e["value"] for k, e in env.items() if "value" in e}
        # Files holding secrets are read at start-up: they live in mounted Secrets.
        for key in ("EXTENDER_SIGNING_KEY_FILE", "EXTENDER_AUTH_TOKEN_FILE"):
            if key in values:
                _secret_of_file(_spec(name), container, values.pop(key))
        Settings.from_env(values)  # every value is accepted
        assert env["REDIS_URL"]["valueFrom"]["secretKeyRef"] == {"name": "schedtune-redis",
                                                                 "key": "url"}
    assert CLI["serve"][0] == "extender.__main__"
    assert CLI["monitor"][0] == "extender.cluster.monitor_process"
    assert CLI["node-watch"][0] == "extender.cluster.node_watch"


def test_node_watcher_runs_alone_and_the_extender_does_not_watch() -> None:
    assert _env(_container("schedtune-extender"))["EXTENDER_NODE_WATCH"]["value"] == "0"
    assert _workloads()["schedtune-node-watch"]["spec"]["replicas"] == 1
    assert "ports" not in _container("schedtune-node-watch")


def test_extender_serves_mutual_tls_with_probes_that_present_a_certificate() -> None:
    spec, container = _spec("schedtune-extender"), _container("schedtune-extender")
    env = {k: e["value"] for k, e in _env(container).items() if "value" in e}
    files = {_secret_of_file(spec, container, env[k]) for k in (
        "EXTENDER_TLS_CERT_FILE", "EXTENDER_TLS_KEY_FILE", "EXTENDER_TLS_CLIENT_CA_FILE")}
    assert files == {("schedtune-extender-tls", "tls.crt"), ("schedtune-extender-tls", "tls.key"),
                     ("schedtune-extender-tls", "ca.crt")}
    assert "EXTENDER_AUTH_TOKEN_FILE" not in env  # kube-scheduler cannot send one
    # kubelet's httpGet probes present no client certificate: exec probes that do.
    for kind, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        probe = container[kind]
        assert "httpGet" not in probe and probe["exec"]["command"][-1] == path
        assert "EXTENDER_TLS_CERT_FILE" in probe["exec"]["command"][2]
    # The scheduler calls the Service on the port the container serves.
    service = {d["kind"]: d for d in _documents(K8S / "extender.yaml")}["Service"]
    port = service["spec"]["ports"][0]
    assert _scheduler_config()["extenders"][0]["urlPrefix"] == (
        f"https://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:"
        f"{port['port']}")
    assert container["ports"] == [{"name": port["targetPort"], "containerPort": port["port"]}]


def test_extender_and_monitor_share_the_signing_key() -> None:
    secrets = set()
    for name in ("schedtune-extender", "schedtune-monitor"):
        container = _container(name)
        path = _env(container)["EXTENDER_SIGNING_KEY_FILE"]["value"]
        secrets.add(_secret_of_file(_spec(name), container, path))
    assert secrets == {("schedtune-signing-key", "key")}


# --- RBAC -----------------------------------------------------------------------------------

def test_each_process_has_its_service_account_with_exactly_its_verbs() -> None:
    docs = _documents(K8S / "rbac.yaml")
    accounts = {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"}
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    bindings = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRoleBinding"}
    for name, grants in GRANTS.items():
        assert _spec(name)["serviceAccountName"] == name and name in accounts
        binding = bindings[name]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                      "kind": "ClusterRole", "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name,
                                        "namespace": NAMESPACE}]
        granted = {(g, r, v) for rule in roles[name]["rules"] for g in rule["apiGroups"]
                   for r in rule["resources"] for v in rule["verbs"]}
        assert granted == grants, name
    assert set(roles) == set(GRANTS)  # no other role of ours, and none reads Secrets
    assert _spec("schedtune-scheduler")["serviceAccountName"] == "schedtune-scheduler"
    assert _spec("schedtune-redis")["automountServiceAccountToken"] is False


# --- NetworkPolicies ------------------------------------------------------------------------

def test_network_policies_admit_only_what_each_port_needs() -> None:
    policies = _policies()
    deny = policies["schedtune-default-deny-ingress"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and "ingress" not in deny
    # Which policy selects which of our workloads.
    selecting = {name: {p for p, spec in policies.items() if spec["podSelector"]
                        and _selects(spec["podSelector"], _labels(name))} for name in _workloads()}
    assert selecting == {
        "schedtune-extender": {"schedtune-extender-from-schedulers"},
        "schedtune-redis": {"schedtune-redis-from-schedtune"},
        "schedtune-monitor": {"schedtune-monitor-metrics-from-prometheus"},
        "schedtune-node-watch": set(), "schedtune-scheduler": set(),
    }
    # The extender's verbs: the scheduler pods (and Volcano's, in its namespace), on 8888.
    admitted, ports = _admitted(policies["schedtune-extender-from-schedulers"])
    assert admitted == {"schedtune-scheduler"}
    assert ports == {c["containerPort"] for c in _container("schedtune-extender")["ports"]}
    # Redis: exactly the workloads that are given REDIS_URL, on the port Redis serves.
    admitted, ports = _admitted(policies["schedtune-redis-from-schedtune"])
    assert admitted == {name for name in _workloads()
                        if "REDIS_URL" in _env(_spec(name)["containers"][0])}
    assert ports == {c["containerPort"] for c in _container("schedtune-redis")["ports"]}
    # The monitor: metrics only, from another namespace (Prometheus'), none of our pods.
    admitted, ports = _admitted(policies["schedtune-monitor-metrics-from-prometheus"])
    monitor_port = int(_env(_container("schedtune-monitor"))["EXTENDER_MONITOR_PORT"]["value"])
    assert admitted == set() and ports == {monitor_port}


# --- Redis ----------------------------------------------------------------------------------

def _redis_args() -> dict[str, str]:
    args = _container("schedtune-redis")["args"]
    return dict(zip(args[::2], args[1::2], strict=True))


def test_redis_persists_with_aof_and_requires_a_password() -> None:
    stateful = _workloads()["schedtune-redis"]
    container = _container("schedtune-redis")
    assert container["args"][:2] == ["--appendonly", "yes"]
    assert stateful["spec"]["volumeClaimTemplates"]
    args = _redis_args()
    assert args["--requirepass"] == "$(REDIS_PASSWORD)"
    assert _env(container)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "schedtune-redis", "key": "password"}
    assert "REDIS_PASSWORD" in container["readinessProbe"]["exec"]["command"][-1]


def test_redis_memory_is_bounded_and_only_filter_records_are_evicted() -> None:
    from extender.state import embedded_redis

    args = _redis_args()
    assert args["--maxmemory-policy"] == embedded_redis.MAXMEMORY_POLICY == "volatile-ttl"
    assert args["--maxmemory"] == embedded_redis.MAXMEMORY
    maxmemory_mib = int(args["--maxmemory"].removesuffix("mb"))
    limit = _container("schedtune-redis")["resources"]["limits"]["memory"]
    assert limit.endswith("Gi") and maxmemory_mib <= int(limit[:-2]) * 1024 // 2  # fork headroom


def test_the_embedded_server_runs_with_that_policy(redis_client) -> None:
    if os.environ.get("REDIS_URL"):
        pytest.skip("REDIS_URL names a server these tests did not start")
    from extender.state import embedded_redis

    config = redis_client.config_get("maxmemory*")
    assert config["maxmemory-policy"] == embedded_redis.MAXMEMORY_POLICY
    assert int(config["maxmemory"]) == int(embedded_redis.MAXMEMORY.removesuffix("mb")) << 20


# --- examples -------------------------------------------------------------------------------

def test_examples_are_annotated_for_schedtune_scheduler_with_valid_demands() -> None:
    """Each example is parsed as the extender parses the pod and sized for an 8 x H100 node:
    it must be estimable and fit one of its GPUs."""
    from estimator.predict import Estimator
    from extender.core.annotations import parse_demand
    from extender.model import NodeGpus, PodInfo
    from extender.sizing import Sizer
    from extender.wire.objects import gpus_requested

    sizer = Sizer(Estimator.load())
    h100 = NodeGpus("NVIDIA-H100-80GB-HBM3", "H100-80GB", 8, 81559)
    seen = set()
    for path in sorted([*K8S.glob("examples/*.yaml"), *K8S.glob("hami/examples/*.yaml")]):
        (doc,) = _documents(path)
        template = doc["spec"]["template"]
        assert template["spec"]["schedulerName"] == "schedtune-scheduler"
        for container in template["spec"]["containers"]:  # a GPU OOM's message is readable
            assert container["terminationMessagePolicy"] == "FallbackToLogsOnError", path
        pod = PodInfo("uid", "pod", "default", template["metadata"]["annotations"],
                      gpus_requested(template["spec"]))
        demand = parse_demand(pod)
        assert demand is not None, path.name
        need = sizer.needs(demand, [h100], {})["H100-80GB"]
        assert 0 < need.padded_mib <= h100.memory_mib and need.gpus == max(1, pod.gpus)
        seen.add("declared" if not demand.model else "transformer" if need.basis else "model")
        seen.add(f"{need.gpus} gpus")
    assert seen >= {"declared", "transformer", "model", "1 gpus", "4 gpus"}
