"""scripts/replay.py end to end: a small generated replay through the HTTP extender, and
bad user input as a clear usage error."""

from __future__ import annotations

import json

from scripts import replay


def test_generated_replay_through_the_http_extender(capsys, tmp_path) -> None:
    code = replay.main(["--workload", "generated", "--jobs", "40", "--rate", "60",
                        "--cluster", "T4:2x2,A100-80GB:1x2", "--data", str(tmp_path), "--json",
                        "--policies", "default", "ours"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["world"].startswith("predicted")  # no reference data in tmp_path
    ours = report["policies"]["ours"]
    assert ours["oom_count"] == 0 and ours["unscheduled"] == 0 and ours["decisions"] >= 40
    assert set(ours) >= {"makespan_s", "avg_jct_s", "p95_jct_s", "avg_queue_s", "mem_util",
                         "oom_count", "unscheduled"}


def test_bad_user_files_are_clear_errors(tmp_path, capsys) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,model,task,batch,units\n0,resnet50,train,32,1\n5,nope,train,8,1\n")
    assert replay.main(["--jobs-file", str(jobs), "--cluster", "T4:1x1", "--json"]) == 2
    assert "jobs.csv:3" in capsys.readouterr().err
