"""The v1.36.2 control-plane binaries, unpacked once into a cache outside the checkout.

`../shared/k8s/kubernetes-v1.36.2-linux-amd64.tar.gz` (read-only in CI) holds
kube-apiserver, kube-scheduler and kubectl. They are unpacked into
``$XDG_CACHE_HOME/schedtune/kubernetes-v1.36.2`` (default ``~/.cache``) under a file
lock, so parallel test workers unpack them once; a marker file records the archive's
size and mtime, so a new archive is unpacked again.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tarfile
from pathlib import Path

VERSION = "v1.36.2"
ARCHIVE = f"kubernetes-{VERSION}-linux-amd64.tar.gz"
BINARIES = ("kube-apiserver", "kube-scheduler", "kubectl")
SHARED_K8S = Path(__file__).resolve().parents[3] / "shared" / "k8s"


def archive_path() -> Path:
    return Path(os.environ.get("SCHEDTUNE_K8S_DIR", SHARED_K8S)) / ARCHIVE


def missing_reason() -> str | None:
    """Why the tier cannot run here (None: it can)."""
    if not archive_path().is_file():
        return f"no Kubernetes binaries at {archive_path()} (set SCHEDTUNE_K8S_DIR)"
    if shutil.which("etcd") is None:
        return "no etcd on PATH (Debian: apt-get install etcd-server)"
    return None


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "schedtune" / f"kubernetes-{VERSION}"


def unpacked() -> Path:
    """The directory holding the three binaries, unpacking the archive if needed."""
    archive, target = archive_path(), cache_dir()
    stamp = f"{archive.stat().st_size} {archive.stat().st_mtime_ns}\n"
    target.mkdir(parents=True, exist_ok=True)
    with (target / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = target / ".unpacked"
        if marker.is_file() and marker.read_text() == stamp and all(
                (target / name).is_file() for name in BINARIES):
            return target
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and Path(m.name).name in BINARIES]
            for member in members:
                member.name = Path(member.name).name
                tar.extract(member, target, filter="data")
        for name in BINARIES:
            (target / name).chmod(0o755)
        marker.write_text(stamp)
    return target
