"""The package as users install it: one `schedtune` command, and a service that runs on the
runtime dependencies alone (the image installs no torch)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scripts import cli

ROOT = Path(__file__).resolve().parent.parent
OFFLINE_ONLY = ("torch", "torchvision", "torchinfo", "tqdm", "matplotlib", "pandas", "sklearn",
                "joblib", "scipy")  # modules; their distributions are the tools' extra
DISTRIBUTIONS = {"sklearn": "scikit-learn"}


def test_every_subcommand_names_a_module_with_main(capsys) -> None:
    import importlib

    for name, (module, _) in cli.COMMANDS.items():
        if name in ("features", "profile"):  # torch at import: checked by their own tests
            continue
        assert callable(importlib.import_module(module).main), name
    assert cli.main([]) == 2 and "usage: schedtune" in capsys.readouterr().out
    assert cli.main(["no-such-command"]) == 2
    assert "unknown command 'no-such-command'" in capsys.readouterr().err
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"schedtune": "scripts.cli:main"}


def test_the_service_imports_nothing_from_the_offline_tools() -> None:
    code = ("import sys, scripts.cli, extender.web.app, extender.cluster.monitor, "
            "extender.cluster.node_watch, scripts.queues, scripts.models; "
            f"print(sorted(m for m in {OFFLINE_ONLY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "[]"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {d.split("==")[0].lower() for d in project["dependencies"]}
    assert not runtime & {DISTRIBUTIONS.get(m, m) for m in OFFLINE_ONLY}
    assert {"torch==2.13.0"} <= set(project["optional-dependencies"]["tools"])


@pytest.mark.parametrize(("command", "env", "needle"), [
    ("serve", {"EXTENDER_WORKERS": "0"}, "EXTENDER_WORKERS='0': expected a number in 1..64"),
    ("monitor", {"EXTENDER_RECONCILE_S": "0"}, "EXTENDER_RECONCILE_S='0'"),
    ("node-watch", {"REDIS_URL": "foo://x"}, "REDIS_URL='foo://x'"),
])
def test_a_setting_no_process_could_use_stops_a_command_with_one_line(command, env, needle,
                                                                      monkeypatch,
                                                                      capsys) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli.main([command]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
