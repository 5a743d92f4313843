"""`schedtune`: one command for the service and its tools, a subcommand each.

    schedtune serve                 # the extender under gunicorn (embedded Redis without REDIS_URL)
    schedtune replay --workload paper --json
    schedtune queues --waiting
    schedtune <command> --help

Each subcommand is a module with `main(argv) -> int`, imported only when run, so
the service image (no torch) starts `serve`, `monitor` and `queues` without the
offline tools' dependencies.
"""

from __future__ import annotations

import importlib
import sys

from extender.settings import SettingsError

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("extender.__main__", "run the extender under gunicorn (extra arguments: gunicorn's)"),
    "monitor": ("extender.cluster.monitor", "follow pod lifecycles through the Kubernetes API"),
    "node-watch": ("extender.cluster.node_watch", "keep node GPU layouts in Redis from the API"),
    "queues": ("scripts.queues", "show the GPU queues and the waiting pods"),
    "models": ("scripts.models", "register users' models with every extender replica"),
    "replay": ("scripts.replay", "replay a workload through the extender against baselines"),
    "train": ("scripts.train", "fit the estimator's artefacts (profiles/models)"),
    "evaluate": ("scripts.evaluate", "held-out accuracy of every estimator design"),
    "features": ("scripts.features", "compute model features with torch (offline)"),
    "profile": ("scripts.profile_gpu", "profile jobs on a real NVIDIA GPU"),
    "fit-interference": ("scripts.fit_interference", "fit the collocation slowdown"),
    "bench": ("scripts.bench_extender", "extender latency against a no-op extender"),
    "chaos": ("scripts.chaos", "fault, race and fuzz scenarios on real processes"),
    "llm-memory": ("scripts.llm_memory", "LLM memory estimates against published measurements"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: schedtune COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {about}" for name, (_, about) in COMMANDS.items()]
    return "\n".join(lines + ["", "schedtune COMMAND --help shows a command's arguments."])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"schedtune: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    sys.argv = [f"schedtune {name}", *rest]  # argparse's prog in each command's messages
    try:
        return int(module.main(rest) or 0)
    except SettingsError as exc:  # an EXTENDER_* variable no command could use
        print(f"schedtune {name}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
