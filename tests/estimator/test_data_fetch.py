"""Where the reference data is read from (`estimator.reference.tables.find_data_dir`) and `schedtune
data fetch` (`estimator.reference.fetch`, `estimator.reference.forests`), against a local HTTP
server serving an artefact of the same shape built here (the tests never reach the
internet): files kept only with their checksum, the reconstructed tables equal to what
scikit-learn's own forests predict, a pickle naming anything else refused."""

from __future__ import annotations

import functools
import http.server
import pickle
import threading
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from estimator.reference import tables as data_module
from estimator.reference.forests import load_forest
from estimator.catalogue import PAPER_GPUS_BY_CUDA_CORES
from estimator.reference.tables import PAPER_DIR, find_data_dir
from estimator.reference.fetch import CHECKSUMS, fetch, sha256
from estimator.errors import EstimatorError
from scripts import data as data_cli

# The authors' GPU columns (model_stats.csv's header) and the forests' feature names, as
# their predictor.py feeds them (github.com/Stone-ResearchLife/Scheduler-SchedTune-CCGrid-2022).
GPU_COLUMNS = ["Pipelines/CUDA cores", "Memory bandwidth (GB/s)", "Memory clock speed (MHz)",
               "Tensor cores", "SM count"]
TRAIN_FEATURES = ["activations", "parameters", "input", "Pipelines/CUDA cores",
                  "Memory bandwidth (GB/s)", "SM count", "Memory clock speed (MHz)",
                  "Tensor cores"]
INFER_FEATURES = ["activations", "parameters", "Memory bandwidth (GB/s)",
                  "Pipelines/CUDA cores", "SM count", "Memory clock speed (MHz)",
                  "Tensor Cores (GPU)"]


def model_stats() -> pd.DataFrame:
    """Two models x the five paper GPUs x batch 8 and 16, figures of our own."""
    rng = np.random.default_rng(7)
    rows = []
    for model, acts in (("resnet18", 227.25), ("vgg11", 610.5)):
        for cores in PAPER_GPUS_BY_CUDA_CORES:
            gpu = [cores, cores / 10, 5000 + cores, cores % 7, cores // 100]
            for batch in (8, 16):
                rows.append([model, batch, acts * batch / 8, 44.5, 4.6 * batch / 8,
                             float(rng.integers(500, 9000)), *gpu])
    return pd.DataFrame(rows, columns=["model", "batchsize", "activations", "parameters",
                                       "input", "peak mem usage", *GPU_COLUMNS])


def forest(features: list[str], seed: int) -> RandomForestRegressor:
    rng = np.random.default_rng(seed)
    x = pd.DataFrame(rng.uniform(0, 11000, size=(300, len(features))), columns=features)
    return RandomForestRegressor(n_estimators=5, random_state=seed).fit(x, x.sum(axis=1))


@pytest.fixture()
def artefact(tmp_path):
    """An artefact directory served over HTTP: (base URL, its files' checksums, forests)."""
    root = tmp_path / "served"
    root.mkdir()
    stats = model_stats()
    stats.to_csv(root / "model_stats.csv", index=False)
    (root / "baseline_arrival_times.csv").write_text("submit,job\n0,inference-resnet18\n")
    (root / "LICENSE").write_text("MIT License (the test's own)\n")
    forests = {"train_time_RFR_5params.joblib": forest(TRAIN_FEATURES, 1),
               "infer_mem_RFR_5params.joblib": forest(INFER_FEATURES, 2),
               "infer_time_RFR_5params.joblib": forest(INFER_FEATURES, 3)}
    for name, model in forests.items():
        joblib.dump(model, root / name)
    checksums = {name: sha256((root / name).read_bytes()) for name in CHECKSUMS}
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", checksums, forests, stats, root
    finally:
        server.shutdown()


def test_fetch_keeps_checked_files_and_rebuilds_the_tables_the_forests_predict(artefact,
                                                                               tmp_path):
    url, checksums, forests, stats, _ = artefact
    said: list[str] = []
    target = fetch(tmp_path / "data", url, checksums, said.append)
    assert target == tmp_path / "data" / PAPER_DIR
    assert (target / "model_stats.csv").read_bytes() == stats.to_csv(index=False).encode()
    train = pd.read_csv(target / "reconstructed_train_time.csv")
    assert list(train.columns) == ["model", "batchsize", "gpu", "activations", "parameters",
                                   "input", "train_time_s_reconstructed"]
    assert len(train) == len(stats) and set(train["gpu"]) == {
        "Tesla K80", "RTX 2070 SUPER", "RTX 3070", "Tesla V100", "RTX 3090"}
    want = forests["train_time_RFR_5params.joblib"].predict(stats[TRAIN_FEATURES]).round(1)
    assert np.allclose(train["train_time_s_reconstructed"], want)
    infer = pd.read_csv(target / "reconstructed_inference.csv")
    batch8 = stats[stats["batchsize"] == 8].rename(columns={"Tensor cores": "Tensor Cores (GPU)"})
    assert len(infer) == len(batch8)
    want = forests["infer_mem_RFR_5params.joblib"].predict(batch8[INFER_FEATURES]).round(0)
    assert np.allclose(infer["infer_peak_mem_mb_reconstructed"], want)
    assert any("fetched, checksum matches" in line for line in said)
    again: list[str] = []
    fetch(tmp_path / "data", url, checksums, again.append)  # nothing downloaded twice
    assert sum("present" in line for line in again) == len(checksums)


def test_a_file_whose_checksum_differs_is_refused_and_not_kept(artefact, tmp_path):
    url, checksums, _, _, root = artefact
    (root / "model_stats.csv").write_text("model,batchsize\naltered,8\n")
    with pytest.raises(EstimatorError, match="SHA-256 .* expected"):
        fetch(tmp_path / "data", url, checksums, lambda _: None)
    target = tmp_path / "data" / PAPER_DIR
    assert not (target / "model_stats.csv").exists()
    assert [p.name for p in target.iterdir() if p.name.startswith(".")] == []


def test_an_unreachable_source_is_one_clear_error_from_the_cli(artefact, tmp_path, capsys):
    url, *_ = artefact
    code = data_cli.main(["fetch", "--into", str(tmp_path / "d"), "--source", url + "/nowhere"])
    assert code == 1
    assert "could not fetch" in capsys.readouterr().err
    # the committed checksums are the authors' files', not this artefact's
    assert data_cli.main(["fetch", "--into", str(tmp_path / "e"), "--source", url]) == 1
    assert "SHA-256" in capsys.readouterr().err


def test_the_forest_reader_predicts_what_scikit_learn_does(tmp_path):
    model = forest(INFER_FEATURES, 4)
    joblib.dump(model, tmp_path / "f.joblib")
    read = load_forest(tmp_path / "f.joblib")
    rows = np.random.default_rng(5).uniform(0, 11000, size=(200, len(INFER_FEATURES)))
    assert read.features == tuple(INFER_FEATURES) and len(read.trees) == 5
    assert np.array_equal(read.predict(rows),
                          model.predict(pd.DataFrame(rows, columns=INFER_FEATURES)))
    with pytest.raises(EstimatorError, match="7 features"):
        read.predict(rows[:, :3])


class RunsACommand:
    def __reduce__(self):
        return (Path.touch, (Path("/tmp/should-never-exist-schedtune"),))


def test_a_pickle_that_names_anything_else_is_refused_unrun(tmp_path):
    (tmp_path / "evil.joblib").write_bytes(pickle.dumps(RunsACommand(), protocol=2))
    with pytest.raises(EstimatorError, match="refused"):
        load_forest(tmp_path / "evil.joblib")
    assert not Path("/tmp/should-never-exist-schedtune").exists()
    (tmp_path / "junk.joblib").write_bytes(b"not a pickle at all")
    with pytest.raises(EstimatorError, match="not a readable forest"):
        load_forest(tmp_path / "junk.joblib")


def test_the_data_directory_is_looked_up_in_order(tmp_path, monkeypatch):
    shared, cache = tmp_path / "shared", tmp_path / "xdg"
    monkeypatch.setattr(data_module, "SHARED_DATA_DIR", shared)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("SCHEDTUNE_DATA", raising=False)
    fetched = cache / "schedtune" / "data"
    assert find_data_dir() == fetched  # none holds it: the cache, which fetch fills
    (fetched / PAPER_DIR).mkdir(parents=True)
    assert find_data_dir() == fetched
    (shared / PAPER_DIR).mkdir(parents=True)
    assert find_data_dir() == shared  # beside the checkout before the cache
    monkeypatch.setenv("SCHEDTUNE_DATA", str(tmp_path / "env"))
    assert find_data_dir() == tmp_path / "env"  # taken as given, even absent
    assert find_data_dir(tmp_path / "flag") == tmp_path / "flag"  # --data first of all
