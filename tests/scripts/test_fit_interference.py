"""`schedtune fit-interference`: unusable throughputs or --out are one line on stderr, exit 1,
and nothing is written."""

from __future__ import annotations

import csv
import json

import pytest

from scripts import fit_interference

GOOD = {gpu: {"a": {"null": 10.0, "b": [6.0, 5.0], "c": [0.0, 0.0]}} for gpu in
        fit_interference.GPUS}


def _write(tmp_path, content: bytes) -> None:
    (tmp_path / "gavel-osdi20").mkdir(exist_ok=True)
    (tmp_path / "gavel-osdi20" / "simulation_throughputs.json").write_bytes(content)


def _with_v100(runs: dict) -> bytes:
    return json.dumps({**GOOD, "v100": {"a": runs}}).encode()


@pytest.mark.parametrize("content, words", [
    (b"", "not valid JSON"), (b'{"k80": {', "not valid JSON"), (b"[1]", "a JSON object"),
    (json.dumps({"k80": GOOD["k80"], "p100": GOOD["p100"]}).encode(), "no 'v100'"),
    (json.dumps({**GOOD, "v100": {}}).encode(), "no 'v100'"),
    (_with_v100({"null": "fast", "b": [6.0, 5.0]}), "finite number"),
    (_with_v100({"null": 10.0, "b": ["x", 5.0]}), "finite number"),
    (_with_v100({"null": 10.0, "b": [-6.0, 5.0]}), "finite number"),
    (_with_v100({"null": 0.0, "b": [0.0, 0.0]}), "no job measured"),
    (_with_v100({"null": 10.0, "b": [1e308, 5.0]}), "outside 0..100"),
    (_with_v100({"null": 1e308, "b": [1e-308, 5.0]}), "outside 0..100"),
])
def test_unusable_throughputs_are_refused(tmp_path, capsys, content, words) -> None:
    _write(tmp_path, content)
    out = tmp_path / "interference.json"
    assert fit_interference.main(["--data", str(tmp_path), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("out", ["", "missing/interference.json"])
def test_out_must_be_a_file_in_an_existing_directory(tmp_path, capsys, out) -> None:
    _write(tmp_path, json.dumps(GOOD).encode())
    assert fit_interference.main(["--data", str(tmp_path), "--out", str(tmp_path / out)]) == 1
    assert "must be a file in an existing directory" in capsys.readouterr().err


def test_good_throughputs_are_fitted(tmp_path) -> None:
    _write(tmp_path, json.dumps(GOOD).encode())
    out = tmp_path / "interference.json"
    assert fit_interference.main(["--data", str(tmp_path), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["alpha"] == pytest.approx(10 / 6 - 1, abs=1e-4)


def test_measured_collocation_is_compared_with_the_committed_alpha(tmp_path, capsys) -> None:
    path = tmp_path / "collocation.csv"
    path.write_text("gpu,k,speed\nH200,2,0.5\nH200,2,0.6\nH200,2,0.4\nH200,4,0.25\n")
    report = fit_interference.compare(list(csv.DictReader(path.open())), alpha=0.5)
    assert report["per_gpu"]["H200"]["2"] == {"jobs": 3, "median_speed": 0.5, "alpha": 1.0,
                                              "committed_speed": 0.6667}
    assert report["per_gpu"]["H200"]["4"]["alpha"] == 1.0
    assert fit_interference.main(["--compare", str(path)]) == 0
    assert '"committed_alpha"' in capsys.readouterr().out
    for bad in ("gpu,k,speed\nH200,1,0.5\n", "gpu,k,speed\nH200,2,nan\n", "gpu,speed\nH200,1\n",
                "gpu,k,speed\nH200,two,0.5\n", "gpu,k,speed\n"):
        path.write_text(bad)
        assert fit_interference.main(["--compare", str(path)]) == 1
        assert "error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fit_interference.main(["--compare", str(path), "--out", str(tmp_path / "x.json")])
    assert "writes nothing" in capsys.readouterr().err
