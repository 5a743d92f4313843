"""etcd and kube-apiserver on free 127.0.0.1 ports, as `../shared/k8s/README.md` says they
run here: static bearer tokens, RBAC (so the manifests' roles are what the project's
processes get), in-tree gang scheduling's feature gates and API on."""

from __future__ import annotations

import shutil
import ssl
import urllib.request
from pathlib import Path

from kubernetes import client, config

from chaos.processes import free_port
from tests.e2e.pki import ADMIN, ControlPlanePki
from tests.e2e.processes import Supervisor

FEATURE_GATES = "GenericWorkload=true,GangScheduling=true"
RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"
READY_TIMEOUT_S = 120.0


def https_get(url: str, ca_file: Path | None, token: str | None = None,
              cert: tuple[Path, Path] | None = None, timeout_s: float = 2.0) -> tuple[int, bytes]:
    """GET over HTTPS; `ca_file` None skips verification (a component's own health port)."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    if ca_file is None:
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class ControlPlane:
    """etcd + kube-apiserver; `server` is the apiserver's URL, `kubeconfig(name)` a file
    for one identity of the PKI."""

    def __init__(self, supervisor: Supervisor, binaries: Path, workdir: Path,
                 pki: ControlPlanePki) -> None:
        self.supervisor, self.binaries, self.pki = supervisor, binaries, pki
        self.workdir = workdir
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        etcd_client, etcd_peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{etcd_client}", f"http://127.0.0.1:{etcd_peer}"
        self.supervisor.start("etcd", [
            shutil.which("etcd") or "etcd", "--name", "e2e",
            "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"e2e={peer_url}", "--unsafe-no-fsync",
            "--log-level", "warn"])  # the apiserver's readiness waits for it
        pki = self.pki
        self.supervisor.start("kube-apiserver", [
            str(self.binaries / "kube-apiserver"),
            f"--etcd-servers={client_url}",
            "--bind-address=127.0.0.1", f"--secure-port={self.port}",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={pki.server_cert}", f"--tls-private-key-file={pki.server_key}",
            f"--client-ca-file={pki.ca_file}",
            f"--token-auth-file={pki.token_file}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--endpoint-reconciler-type=none",
            # no controller manager: nothing would mint service-account tokens or clear taints
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            f"--feature-gates={FEATURE_GATES}", f"--runtime-config={RUNTIME_CONFIG}",
            "--profiling=false", "--v=1"],
            ready=self.ready, timeout_s=READY_TIMEOUT_S)

    def ready(self) -> bool:
        status, _ = https_get(f"{self.server}/readyz", self.pki.ca_file,
                              self.pki.identities[ADMIN].token)
        return status == 200

    def kubeconfig(self, name: str) -> Path:
        return self.pki.kubeconfig(name, self.server)

    def api_client(self, name: str = ADMIN) -> client.ApiClient:
        return config.new_client_from_config(str(self.kubeconfig(name)))
