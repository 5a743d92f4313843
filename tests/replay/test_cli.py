"""scripts/replay.py end to end: small replays through the HTTP extender, many orders,
and bad user input as a clear usage error, never a traceback."""

from __future__ import annotations

import csv
import json

import pytest

from estimator.reference.tables import PAPER_DIR
from scripts import replay

SMALL = ["--workload", "generated", "--jobs", "40", "--rate", "60",
         "--cluster", "T4:2x2,A100-80GB:1x2", "--json"]


def test_generated_replay_through_the_http_extender(capsys, tmp_path) -> None:
    code = replay.main([*SMALL, "--data", str(tmp_path), "--policies", "default", "ours",
                        "--world", "predicted"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["world"].startswith("predicted")  # no reference data in tmp_path
    assert report["cluster"]["collocation_limits"] == {"A100-80GB": 4, "T4": 4}
    assert "start-up shares the GPU and is slowed by it" in report["assumptions"]
    ours = report["policies"]["ours"]
    assert ours["oom_count"] == 0 and ours["unscheduled"] == 0 and ours["decisions"] >= 40
    assert set(ours) >= {"makespan_s", "avg_jct_s", "p95_jct_s", "avg_queue_s", "mem_util",
                         "oom_count", "retries", "failed", "unscheduled", "oom_reserves"}


def test_many_orders_are_summarised_with_one_plot_per_figure(capsys, tmp_path) -> None:
    code = replay.main([*SMALL, "--jobs", "12", "--data", str(tmp_path), "--orders", "2",
                        "--policies", "default", "oracle", "ours", "--plots",
                        str(tmp_path / "plots"), "--collocation", "T4=2"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["orders"] == 2 and len(report["per_order"]) == 2
    assert report["cluster"]["collocation_limits"] == {"A100-80GB": 4, "T4": 2}
    assert report["world"].startswith("perturbed (1)")  # the generated default
    assert set(report["summary"]) == {"default", "oracle", "ours"}
    assert set(report["summary"]["ours"]["makespan_s"]) == {"median", "p10", "p90", "worst"}
    assert set(report["versus"]) == {"default", "oracle"}
    assert report["oracles"] == ["oracle"]
    assert sorted(p.rsplit("/", 1)[1] for p in report["plots"]) == [
        "orders_avg_jct_s.png", "orders_makespan_s.png", "orders_mem_util.png",
        "orders_oom_count.png", "orders_p95_jct_s.png"]


def test_every_job_of_one_replay_is_written_with_where_it_ran(capsys, tmp_path) -> None:
    out = tmp_path / "deep" / "jobs.csv"
    code = replay.main([*SMALL, "--jobs", "20", "--data", str(tmp_path), "--policies",
                        "default", "ours", "--world", "predicted", "--jobs-out", str(out)])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["jobs_out"] == str(out)
    with out.open() as handle:
        rows = list(csv.DictReader(handle))
    types = {"T4", "A100-80GB"}
    assert {c for c in rows[0] if c.startswith("alone_s:")} == {f"alone_s:{t}" for t in types}
    for policy in ("default", "ours"):
        mine = [r for r in rows if r["policy"] == policy]
        assert sorted(int(r["job"]) for r in mine) == list(range(20))
        ends = [float(r["ended_s"]) for r in mine]
        assert ends == sorted(ends)  # in the order they ended
        assert ends[-1] == pytest.approx(report["policies"][policy]["makespan_s"], abs=0.1)
        for r in mine:
            assert float(r["arrival_s"]) <= float(r["placed_s"]) <= float(r["ended_s"])
            assert r["gpu_type"] == ("T4" if r["node"].startswith("t4-") else "A100-80GB")
            assert r["alone_s"] == r[f"alone_s:{r['gpu_type']}"] and float(r["alone_s"]) > 0
            assert int(r["units"]) >= 1


@pytest.mark.parametrize("argv", [
    ["--orders", "2", "--shuffle", "3"],
    ["--parallel", "99"],
    ["--world", "everywhere"],
    ["--retry-limit", "-1"],
    ["--workload", "generated", "--rate", "nan"],
    ["--workload", "generated", "--rate", "1e-300"],
    ["--workload", "generated", "--rate", "inf"],
])
def test_bad_flags_are_usage_errors(capsys, argv) -> None:
    with pytest.raises(SystemExit) as exit_:
        replay.main(argv)
    assert exit_.value.code == 2 and "error" in capsys.readouterr().err


def test_bad_values_are_clear_errors(tmp_path, capsys) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,model,task,batch,units\n0,resnet50,train,32,1\n5,nope,train,8,1\n")
    assert replay.main(["--jobs-file", str(jobs), "--cluster", "T4:1x1", "--json"]) == 2
    assert "jobs.csv:3" in capsys.readouterr().err
    assert replay.main([*SMALL, "--collocation", "T4=0"]) == 2
    assert "a limit is an integer in 1..64" in capsys.readouterr().err
    assert replay.main([*SMALL, "--collocation", "H999=2"]) == 2
    assert "expected TYPE=N" in capsys.readouterr().err
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes: [{gpu: T4, count: two}]\n")
    assert replay.main([*SMALL, "--cluster-file", str(cluster)]) == 2
    assert "cluster.yaml nodes[0]" in capsys.readouterr().err
    for spec, needle in (("T4:1x100000000", "1..20000 nodes of 1..64 GPUs each"),
                         ("T4:1x0", "1..20000 nodes of 1..64 GPUs each"),
                         ("T4:20001x1", "1..20000 nodes")):
        assert replay.main([*SMALL, "--cluster", spec]) == 2
        assert needle in capsys.readouterr().err
    for text, needle in (("nodes: [{name: a, gpu: T4}, {name: a, gpu: L4}]",
                          "node name 'a' given twice"),
                         ("nodes: [{name: 'x:y/z', gpu: T4}]", "a node name must be a DNS-1123"),
                         ("nodes: [{gpu: T4, count: .inf}]", "cluster.yaml nodes[0]"),
                         ("nodes: [{gpu: T4, count: 65}]", "1..64 GPUs")):
        cluster.write_text(text + "\n")
        assert replay.main([*SMALL, "--cluster-file", str(cluster)]) == 2
        assert needle in capsys.readouterr().err
    cluster.write_bytes(b"nodes: [{gpu: \xff\xfe}]\n")
    assert replay.main([*SMALL, "--cluster-file", str(cluster)]) == 2
    assert "cluster.yaml: not YAML" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # checked before anything replays: none lost
        replay.main([*SMALL, "--plots", str(jobs)])
    assert exit_.value.code == 2
    assert f"--plots {jobs}: a file is there" in capsys.readouterr().err
    for more, needle in ((["--jobs-out", str(tmp_path)], "a directory is there"),
                         (["--jobs-out", str(jobs), "--orders", "2"], "leave out --orders"),
                         (["--jobs-out", str(jobs / "x.csv")], "cannot write in")):
        with pytest.raises(SystemExit) as exit_:
            replay.main([*SMALL, *more])
        assert exit_.value.code == 2 and needle in capsys.readouterr().err
    assert replay.main([*SMALL, "--world", "lomo", "--data", str(tmp_path)]) == 2
    assert "--world lomo trains held-out artefacts from the reference data" in \
        capsys.readouterr().err


def test_ours_is_the_extender_as_the_environment_configures_it(capsys, tmp_path,
                                                               monkeypatch) -> None:
    monkeypatch.setenv("EXTENDER_SCORING", "shared")
    monkeypatch.setenv("EXTENDER_BIND", "api")  # how it runs, not how it decides: not taken
    code = replay.main([*SMALL, "--jobs", "10", "--data", str(tmp_path), "--policies", "ours"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["ours_configured_by"] == {
        "EXTENDER_SCORING": "shared"}
    monkeypatch.setenv("EXTENDER_SCORING", "nope")
    assert replay.main([*SMALL, "--jobs", "10", "--data", str(tmp_path), "--policies",
                        "ours"]) == 2
    assert "EXTENDER_SCORING='nope'" in capsys.readouterr().err


def test_a_terminated_replay_takes_its_embedded_redis_with_it(tmp_path) -> None:
    """SIGTERM (as `timeout` or a job's end sends it) stops a replay as Ctrl-C does: one
    line, exit 130, and no redis-server or temporary directory left behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("REDIS_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "replay", "--workload", "generated", "--jobs",
         "100000", "--rate", "600", "--data", str(tmp_path / "none"), "--policies", "ours"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, redis_pids = time.monotonic() + 120, []
    while not redis_pids and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        children = f"/proc/{proc.pid}/task/{proc.pid}/children"
        redis_pids = [int(pid) for pid in open(children).read().split()
                      if "redis-server" in open(f"/proc/{pid}/cmdline").read()] \
            if os.path.exists(children) else []
    assert redis_pids, proc.stderr.read() if proc.poll() is not None else "no redis-server"
    time.sleep(0.5)  # Popen has returned: the replay knows its server
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().endswith("schedtune replay: interrupted")
    assert not any(os.path.exists(f"/proc/{pid}") for pid in redis_pids)
    assert not list(tmp_path.glob("schedtune-replay-*"))


@pytest.mark.parametrize(("argv", "jobs"), [
    ([], replay.QUICK_JOBS),  # the main command, no reference data: about a minute
    (["--workload", "generated"], 1000),  # the world the README's tables replay
    (["--jobs", "1000"], 1000),
    (["--workload", "gangs"], 240),
])
def test_the_main_command_without_reference_data_replays_a_quick_world(tmp_path, argv,
                                                                        jobs) -> None:
    args = replay._parser().parse_args([*argv, "--data", str(tmp_path)])
    replay._default_size(args)
    assert args.jobs == jobs


def test_with_reference_data_the_main_command_keeps_the_full_size(tmp_path) -> None:
    (tmp_path / PAPER_DIR).mkdir()  # where the paper's files would be
    args = replay._parser().parse_args(["--data", str(tmp_path)])
    replay._default_size(args)
    assert args.jobs == 1000
