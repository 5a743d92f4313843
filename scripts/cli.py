"""`schedtune`: one command for the service and its tools, a subcommand each.

    schedtune serve                 # the extender under gunicorn (embedded Redis without REDIS_URL)
    schedtune replay --workload paper --json
    schedtune queues --waiting
    schedtune <command> --help

Each subcommand is a module with `main(argv) -> int`, imported only when run, so
the service image (no torch) starts `serve`, `monitor` and `queues` without the
offline tools' dependencies. Ctrl-C in any of them is one line and exit status 130.
"""

from __future__ import annotations

import difflib
import importlib
import sys

from extender.settings import SettingsError

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("extender.__main__", "run the extender under gunicorn (extra arguments: gunicorn's)"),
    "monitor": ("extender.cluster.monitor_process", "follow pod lifecycles through the Kubernetes API"),
    "node-watch": ("extender.cluster.node_watch", "keep node GPU layouts in Redis from the API"),
    "queues": ("scripts.queues", "show the GPU queues and the waiting pods"),
    "models": ("scripts.models", "register users' models with every extender replica"),
    "replay": ("scripts.replay", "replay a workload through the extender against baselines"),
    "data": ("scripts.data", "where the paper's reference data is read from; fetch it"),
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
        near = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        print(f"schedtune: unknown command {name!r}{hint}\n\n{usage()}", file=sys.stderr)
        return 2
    sys.argv = [f"schedtune {name}", *rest]  # argparse's prog in each command's messages
    try:
        return int(importlib.import_module(COMMANDS[name][0]).main(rest) or 0)
    except SettingsError as exc:  # an EXTENDER_* variable no command could use
        print(f"schedtune {name}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the user knows where; no traceback
        print(f"schedtune {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
