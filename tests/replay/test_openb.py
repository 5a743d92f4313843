"""The Alibaba openb trace format: nodes and pods mapped onto the replay, malformed files
as clear errors, and a small generated trace replayed end to end through the extender."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay import openb
from replay.workloads import ReplayError
from scripts import replay

TRACE = Path(__file__).resolve().parent.parent / "data" / "openb"


def test_nodes_and_pods_map_onto_gpus_and_declared_memory() -> None:
    trace = openb.load(TRACE)
    assert len(trace.nodes) == 14  # the two CPU-only nodes are left out
    g2 = next(n for n in trace.nodes if n.gpu_type == "G2")
    assert (g2.count, g2.memory_mib, g2.slots) == (8, 32768, openb.TRACE_SLOTS)
    assert {n.gpu_type for n in trace.nodes} == {"G2", "T4", "V100-32GB", "V100-16GB", "A10",
                                                 "P100"}
    assert trace.skipped == {"no_gpu": 22, "no_duration": 11}
    assert len(trace.jobs) == 240 - 22 - 11
    assert trace.jobs[0].arrival_s == 0 and all(
        a.arrival_s <= b.arrival_s for a, b in zip(trace.jobs, trace.jobs[1:]))
    # openb-pod-0002: 1 GPU, gpu_milli 200, T4 only: a fifth of a T4; runs 347 s
    pod = next(j for j in trace.jobs if j.gpu_types == ("T4",) and j.duration_s == 347)
    assert pod.declared_mib == 3072 and pod.gpus == 1
    whole = [j for j in trace.jobs if j.gpus > 1]
    assert whole and all(j.declared_mib >= 15360 for j in whole)  # each card whole


@pytest.mark.parametrize(("nodes", "pods", "message"), [
    ("sn,gpu\nn0,8\n", None, "no column model"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,8,H999\n", None, ":2: GPU model 'H999'"),
    (None, "name,num_gpu\np,1\n", "no column gpu_milli"),
    (None, "name,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time,scheduled_time\n"
           "p,1,abc,,1,5,2\n", ":2: gpu_milli 'abc' is not a number"),
    (None, "name,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time,scheduled_time\n"
           "p,1,1500,,1,5,2\n", ":2: expected num_gpu 1..64, gpu_milli 1..1000"),
    (None, b"\xff\xfe\x00garbage", "not a CSV file"),
    ("sn,gpu,model\nn0,8,T4\nn0,2,T4\n", None, "node name 'n0' given twice"),
    ("sn,gpu,model\nNode_With Space/x,8,T4\n", None, "a node name must be a DNS-1123"),
    ("gpu,model,sn\n8,T4\n", None, "a node name must be"),
    (None, "name,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time,scheduled_time\n"
           "p,2,2000,,1,5,2\n", ":2: expected num_gpu 1..64, gpu_milli 1..1000"),
    (None, "name,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time,scheduled_time\n"
           "p,1,100,,1,1e300,2\n", ":2: deletion_time 1e\\+300 s"),
])
def test_malformed_trace_files_are_clear_errors(tmp_path, nodes, pods, message) -> None:
    for name, text in ((openb.NODE_FILE, nodes), (openb.POD_FILE, pods)):
        source = (TRACE / name).read_bytes()
        data = text if isinstance(text, bytes) else text.encode() if text else source
        (tmp_path / name).write_bytes(data)
    with pytest.raises(ReplayError, match=message):
        openb.load(tmp_path)


def test_the_trace_replays_end_to_end_through_the_extender(capsys) -> None:
    code = replay.main(["--workload", "openb", "--trace-dir", str(TRACE), "--json",
                        "--policies", "default", "declared", "ours"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["world"].startswith("trace (openb)") and report["jobs"] == 207
    ours, default = report["policies"]["ours"], report["policies"]["default"]
    assert ours["decisions"] >= 207 and ours["decisions_per_s"] > 0
    assert ours["oom_count"] == 0 and 0 < ours["placed_on_arrival"] <= 1
    # sharing places more pods the moment they arrive than whole GPUs do
    assert ours["placed_on_arrival"] > default["placed_on_arrival"]
    # pods asking more T4s than a T4 node has can never run, under any policy
    assert ours["unscheduled"] == default["unscheduled"] == report["policies"]["declared"][
        "unscheduled"] > 0


def test_openb_needs_its_trace_directory(capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_:
        replay.main(["--workload", "openb"])
    assert exit_.value.code == 2 and "--trace-dir" in capsys.readouterr().err
    assert replay.main(["--workload", "openb", "--trace-dir", str(tmp_path)]) == 2
    assert "openb_node_list_gpu_node.csv is missing" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["--cluster", "T4:1x1"], ["--world", "lomo"],
                                   ["--jobs-file", "jobs.csv"], ["--cluster-file", "c.yaml"]])
def test_options_the_trace_replaces_are_refused_not_ignored(capsys, tmp_path, extra) -> None:
    with pytest.raises(SystemExit) as exit_:
        replay.main(["--workload", "openb", "--trace-dir", str(tmp_path), *extra])
    assert exit_.value.code == 2 and "leave out --cluster" in capsys.readouterr().err
