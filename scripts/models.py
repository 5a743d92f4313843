"""Register users' models with every extender replica at once (no restart, no rebuild).

    schedtune models add convnext-s --torchvision convnext_small
    schedtune models add mynet --entry-point mynet.model:build --path ./src \\
        --input image:3x256x256 --family mynet
    schedtune models add my-llm --transformer-config ./config.json
    schedtune models load profiles/registered/*.json   # publish exported entries again
    schedtune models list
    schedtune models show mynet
    schedtune models remove mynet

`add` builds the model offline (torch; nothing downloaded), computes its features
for the usual batch sizes, publishes them to Redis (REDIS_URL, else the embedded
server of `schedtune serve` in EXTENDER_STATE_DIR) and exports the entry to
`--export` (default ./profiles/registered) for version control. A pod then names it
in schedtune.io/model. `--entry-point` runs the user's code in a process of its own,
killed at `--timeout`.

Everything printed from stored or user data (fields, names, file names, the reader's
errors) goes through `shown`: control characters appear as escapes (\\x1b), never raw.

Exit status (every failure is one line on stderr):
    0  done
    1  the model named is not registered (show, remove)
    2  refused input: arguments, files or entries, or a model that fails to build,
       outlives --timeout or whose build process dies
    3  Redis unavailable: `schedtune serve` starts an embedded one in EXTENDER_STATE_DIR
       (the default without REDIS_URL), or set REDIS_URL
  130  interrupted (Ctrl-C), from `schedtune`
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError
from estimator.transformer.config import read_json
from estimator.user_models.entry import (
    MAX_ENTRY_BYTES,
    MAX_TEXT,
    RegisteredModel,
    RegistryError,
    read_entries,
)  # fmt: skip
from extender.errors import StoreUnavailable
from extender.settings import Settings, SettingsError
from extender.state.embedded_redis import open_store, unreachable_hint
from extender.state.store import RedisStore

EXPORT_DIR = Path("profiles") / "registered"
BUILD_TIMEOUT_S = 300.0
MAX_TIMEOUT_S = 86400.0
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL, C1: what terminals act on
JSON_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # newlines: JSON's layout
# The child's first act: the parent's import path (so it imports what the parent would,
# scripts included), then `_build_in_child` with the request read from stdin.
CHILD_MAIN = ("import json, sys; request = json.load(sys.stdin); sys.path[:] = request['path']; "
              "from scripts.models import _build_in_child; _build_in_child(request)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", help="build a model, compute its features, publish it")
    add.add_argument("name", help="what pods will put in schedtune.io/model")
    source = add.add_mutually_exclusive_group(required=True)
    source.add_argument("--torchvision", metavar="ARCH", help="a torchvision architecture")
    source.add_argument("--entry-point", metavar="MODULE:FACTORY",
                        help="a function in your code returning an nn.Module")
    source.add_argument("--transformer-config", metavar="FILE", type=Path,
                        help="a transformer's config.json (Hugging Face keys or ours)")
    add.add_argument("--path", type=Path, help="directory to import --entry-point from")
    add.add_argument("--input", default="image:3x224x224",
                     help="the entry point's input: image:CxHxW or tokens:SEQ_LEN:VOCAB")
    add.add_argument("--classes", type=int, default=1000, help="outputs the loss expects")
    add.add_argument("--family", help="architecture family (default: a family of its own)")
    add.add_argument("--export", type=Path, default=EXPORT_DIR,
                     help=f"directory for the entry's JSON (default {EXPORT_DIR})")
    add.add_argument("--no-export", action="store_true")
    add.add_argument("--timeout", type=_timeout_s, default=BUILD_TIMEOUT_S, metavar="SECONDS",
                     help=f"kill an --entry-point build after this (default {BUILD_TIMEOUT_S:g})")
    load = verbs.add_parser("load", help="publish exported entries (no torch)")
    load.add_argument("files", nargs="+", type=Path)
    verbs.add_parser("list", help="registered models").add_argument("--json", action="store_true")
    show = verbs.add_parser("show", help="one model's entry")
    show.add_argument("name")
    verbs.add_parser("remove", help="unregister a model").add_argument("name")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env(os.environ)
        return VERBS[args.verb](args, open_store(settings))
    except (EstimatorError, SettingsError, OSError) as exc:
        print(shown(f"error: {exc}"), file=sys.stderr)
        return 2
    except StoreUnavailable as exc:
        print(shown(f"error: {exc}"), shown(unreachable_hint(settings)), sep="\n",
              file=sys.stderr)
        return 3


def shown(text: str, json_text: bool = False) -> str:
    """`text` safe to print: control characters as escapes (\\x1b), so stored or user data
    cannot drive the terminal. `json_text`: \\u001b escapes instead, newlines kept, so
    JSON stays valid and reads back the same."""
    if json_text:
        return JSON_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _timeout_s(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TIMEOUT_S:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {MAX_TIMEOUT_S:g}]")
    return seconds


def _add(args: argparse.Namespace, store: RedisStore) -> int:
    from estimator.user_models import build  # torch, offline

    store.models.revision()  # Redis reachable before a build of minutes
    if args.family is not None and not 0 < len(args.family) <= MAX_TEXT:
        raise EstimatorError(f"--family must be 1..{MAX_TEXT} characters")
    if not args.no_export and args.export.exists() and not args.export.is_dir():
        raise EstimatorError(f"--export {args.export} is not a directory")
    if args.transformer_config is not None:
        _read_limited(args.transformer_config)  # read_json reads all there is: bound it first
        config = read_json(args.transformer_config)
        entry = build.transformer_entry(args.name, config, str(args.transformer_config),
                                              args.family)
    elif args.torchvision:
        spec = build.torchvision_spec(args.name, args.torchvision, args.family)
        entry = build.compute(spec, "torchvision", args.torchvision)
    else:
        entry = _build_entry_point(args)
    _check(entry)
    _publish(store, entry)
    if not args.no_export:
        args.export.mkdir(parents=True, exist_ok=True)
        path = args.export / f"{entry.name}.json"
        path.write_bytes(entry.to_json() + b"\n")
        print(shown(f"exported {path}"))
    return 0


def _build_entry_point(args: argparse.Namespace) -> RegisteredModel:
    """The entry of the user's factory, built in a child process in a session of its own:
    killed (its whole process group) at `args.timeout`, on Ctrl-C here, or on any error here.
    Raises `RegistryError`: the factory failed (one line), timed out, or its process ended
    without handing back an entry."""
    request = {"path": sys.path, "name": args.name, "target": args.entry_point,
               "input": args.input, "family": args.family, "classes": args.classes,
               "module_path": None if args.path is None else str(args.path),
               "timeout_s": args.timeout}
    child = subprocess.Popen([sys.executable, "-c", CHILD_MAIN], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, start_new_session=True)
    try:
        out, _ = child.communicate(json.dumps(request).encode(), timeout=args.timeout)
    except subprocess.TimeoutExpired as exc:
        raise RegistryError(f"--entry-point {args.entry_point}: no model after "
                            f"{args.timeout:g} s, build killed (raise --timeout if it is only "
                            "slow)") from exc
    finally:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    try:
        answer = json.loads(out)
        entry, error = answer.get("entry"), answer.get("error")
    except (ValueError, AttributeError):  # no reply, a cut one, or not an object
        entry = error = None
    if isinstance(error, str):
        raise RegistryError(error)
    if not isinstance(entry, str):
        ended = (f"was killed by {signal.Signals(-child.returncode).name}"
                 if child.returncode < 0 else f"exited with status {child.returncode}")
        raise RegistryError(f"--entry-point {args.entry_point}: the build's process {ended} "
                            "without handing back a model")
    return RegisteredModel.from_json(entry)


def _build_in_child(request: dict[str, Any]) -> None:
    """The child's side of `_build_entry_point`: `build.entry_point_spec` and `compute`,
    then one JSON reply, {"entry": ...} or {"error": one line}, on the stdout it was given.
    The user's code prints to stderr instead, and cannot keep the process alive after."""
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    # Should the parent die without killing it (SIGKILL), SIGALRM ends it a little later.
    signal.alarm(math.ceil(request["timeout_s"]) + 10)
    from estimator.user_models import build  # torch, offline

    try:
        path = request["module_path"]
        spec = build.entry_point_spec(request["name"], request["target"], request["input"],
                                            request["family"], request["classes"],
                                            None if path is None else Path(path))
        answer = {"entry": build.compute(spec, "entry-point", request["target"])
                  .to_json().decode()}
    except EstimatorError as exc:
        answer = {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001  (one line to the parent, not a traceback)
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    reply.write(json.dumps(answer))
    reply.flush()
    os._exit(0)  # threads the user's code started must not hold the reply back


def _load(args: argparse.Namespace, store: RedisStore) -> int:
    entries = []
    for path in args.files:
        raw = _read_limited(path)
        try:
            entries.append(RegisteredModel.from_json(raw))
            _check(entries[-1])
        except EstimatorError as exc:
            raise EstimatorError(f"{path}: {exc}") from exc
    for entry in entries:  # all read and checked before any is published
        _publish(store, entry)
    return 0


def _read_limited(path: Path, limit_bytes: int = MAX_ENTRY_BYTES) -> bytes:
    """A regular file of at most `limit_bytes`, reading no more than one byte past them:
    a huge file, a directory, a FIFO or a device is refused unread (`RegistryError`)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without waiting for a writer
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RegistryError(f"{path}: not a regular file")
        with open(fd, "rb", closefd=False) as file:
            data = file.read(limit_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > limit_bytes:
        raise RegistryError(f"{path}: larger than {limit_bytes} bytes, the most an entry may be")
    return data


def _builtin_names() -> frozenset[str]:
    """Names no registered entry may take: the built-in and shipped models'."""
    from estimator.feature_table import FeatureTable
    from estimator.transformer import shipped_configs

    return frozenset(FeatureTable.load().models) | frozenset(shipped_configs())


def _check(entry: RegisteredModel) -> None:
    """Refuse what the extender would not use: what its reader (`read_entries`, as every
    replica reads the registry) would skip."""
    _, unusable = read_entries({entry.name: entry.to_json()}, _builtin_names())
    if unusable:
        raise EstimatorError(unusable[entry.name])


def _publish(store: RedisStore, entry: RegisteredModel) -> None:
    store.models.publish(entry.name, entry.to_json())
    print(shown(f"registered {entry.name} ({entry.kind}, family {entry.family}): every "
                "extender replica estimates it from its next request"))


def _list(args: argparse.Namespace, store: RedisStore) -> int:
    _, entries = store.models.entries()
    models, unusable = read_entries(entries, _builtin_names())
    rows = [{"name": name, "error": unusable[name]} if name in unusable else
            {"name": name, "kind": models[name].kind, "family": models[name].family,
             "source": models[name].source} for name in sorted(entries)]
    if args.json:
        print(shown(json.dumps(rows, indent=2), json_text=True))
    else:
        for row in rows:
            print(shown(f"{row['name']:<32} " + (
                f"UNUSABLE: {row['error']}" if "error" in row else
                f"{row['kind']:<12} {row['family']:<24} {row['source']}")))
        if not rows:
            print("no registered models")
    return 0


def _show(args: argparse.Namespace, store: RedisStore) -> int:
    raw = store.models.entry(args.name)
    if raw is None:
        print(shown(f"error: {args.name!r} is not registered"), file=sys.stderr)
        return 1
    print(shown(RegisteredModel.from_json(raw).to_json().decode(), json_text=True))
    return 0


def _remove(args: argparse.Namespace, store: RedisStore) -> int:
    if not store.models.remove(args.name):
        print(shown(f"error: {args.name!r} is not registered"), file=sys.stderr)
        return 1
    print(shown(f"removed {args.name}: pods naming it are refused from the next request"))
    return 0


VERBS = {"add": _add, "load": _load, "list": _list, "show": _show, "remove": _remove}

if __name__ == "__main__":
    sys.exit(main())
