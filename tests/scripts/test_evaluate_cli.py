"""`schedtune evaluate`: options that cannot work are usage errors (exit 2)."""

from __future__ import annotations

import pytest

from scripts import evaluate


@pytest.mark.parametrize("argv, words", [
    (["--jobs", "0"], "expected a positive integer, got '0'"),
    (["--parts", "--target", "train-time"], "memory targets only"),
    (["--parts", "--gpu", "H200"], "takes no --gpu"),
    (["--service", "x.csv", "--gpu", "H200"], "takes no --gpu"),
    (["--service", "x.csv", "--target", "infer-time"], "takes no --gpu"),
])
def test_impossible_options_are_refused(capsys, argv, words) -> None:
    with pytest.raises(SystemExit) as exited:
        evaluate.main(argv)
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


def test_service_mode_scores_the_committed_artefacts_against_profiled_rows(tmp_path,
                                                                           capsys) -> None:
    """An honest row is covered; a row far above any prediction is counted under-allocated
    with how far; unusable files are one line, exit 1."""
    import json

    path = tmp_path / "measured.csv"
    path.write_text("model,task,batch,gpu,peak_mib,seconds\n"
                    "resnet50,train,32,H200,4295,60.0\n"
                    "resnet50,train,64,H200,90000,30.0\n"
                    "resnet50,inference,8,H200,1000,0.002\n")
    assert evaluate.main(["--service", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    train = report["train"]
    # The H200 is seen: its profiled rows have an artefact of their own (own_fits).
    assert (train["rows"], train["under_alloc"], train["gpu_seen"]) == (2, 1, True)
    from estimator.predict import Estimator, Job

    padded = Estimator.load().estimate(Job("resnet50", "train", 64), gpus=["H200"])["H200"]
    assert train["worst_under_pct"] == pytest.approx(100 * (90000 - padded.padded_mib) / 90000)
    assert report["inference"]["rows"] == 1 and report["inference"]["under_alloc"] == 0
    for bad in ("model,task\nresnet50,train\n",
                "model,task,batch,gpu,peak_mib,seconds\nresnet50,train,32,B300,1,1\n",
                "model,task,batch,gpu,peak_mib,seconds\nnope,train,32,H200,1,1\n",
                "model,task,batch,gpu,peak_mib,seconds\nresnet50,train,32,H200,1,1\n"
                "resnet50,train,32,H200,2,1\n"):
        path.write_text(bad)
        assert evaluate.main(["--service", str(path)]) == 1
        assert "error:" in capsys.readouterr().err
    assert evaluate.main(["--service", str(tmp_path)]) == 1  # a directory
    assert "is not a file" in capsys.readouterr().err


def test_a_held_out_gpus_time_is_marked_as_the_service_prices_it(capsys, data_dir) -> None:
    """The service times a GPU type its time artefacts never saw from the hardware: one GPU
    type out, the design marked chosen is that one, not the committed regression."""
    import json
    from pathlib import Path

    from estimator.predict import HARDWARE_DESIGN

    measured = Path(__file__).resolve().parents[2] / "profiles" / "measured" / "H200.csv"
    argv = ["--target", "train-time", "--data", str(data_dir), "--measurements", str(measured),
            "--gpu", "H200", "--designs", "ours", HARDWARE_DESIGN, "--jobs", "1", "--json"]
    assert evaluate.main([*argv, "--protocol", "logo"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["chosen"] == HARDWARE_DESIGN
    assert report["reconstructed_data"] is False  # the H200's rows are measured
    assert evaluate.main([*argv, "--protocol", "lomo"]) == 0
    assert json.loads(capsys.readouterr().out)["chosen"] == "ours"
