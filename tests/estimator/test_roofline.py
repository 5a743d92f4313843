"""The hardware time model: its fit, its bounds, and its held-out evaluation on real rows."""

import numpy as np
import pandas as pd
import pytest

from estimator.catalogue import CATALOGUE
from estimator.fitting.evaluation import _held_apart, held_out, metrics
from estimator.fitting.regressors import DESIGNS
from estimator.reference.tables import MEASURED_DIR, load_target
from estimator.fitting.regressors import RooflineRegressor
from estimator.roofline import ARCHITECTURES, COLUMNS, THROUGHPUT, gpu_columns


def test_every_catalogue_type_has_its_peak_rates() -> None:
    assert set(THROUGHPUT) == set(CATALOGUE)
    for name, rates in THROUGHPUT.items():
        assert rates.fp32_tflops > 0, name
        assert rates.tf32_tflops == 0 or rates.tf32_tflops >= rates.fp32_tflops, name
        columns = gpu_columns(name)
        assert columns["conv_tflops"] == (rates.tf32_tflops or rates.fp32_tflops)
        assert columns["mm_tflops"] == rates.fp32_tflops  # cuBLAS without TF32 by default


def _rows(rng: np.random.Generator, gpus: list[str], n: int) -> pd.DataFrame:
    """Synthetic training epochs: random step costs on the given GPU types."""
    gpu = rng.choice(gpus, n)
    frame = pd.DataFrame({
        "op_conv_gflops": rng.uniform(10, 2000, n), "op_mm_gflops": rng.uniform(0, 500, n),
        "op_conv_gb": rng.uniform(0.1, 10, n), "op_mm_gb": rng.uniform(0, 3, n),
        "op_other_gb": rng.uniform(1, 60, n), "op_kernels": rng.uniform(100, 3000, n),
        "steps": rng.uniform(100, 6000, n), "samples": 50_000.0,
        "input_pipeline": 0.0, "unit_s": 1.0,
    })
    return pd.concat([frame, pd.DataFrame([gpu_columns(g) for g in gpu])], axis=1).assign(gpu=gpu)


def _truth(frame: pd.DataFrame, compute: float, memory: float, per_kernel: float) -> np.ndarray:
    bandwidth = frame["mem_bandwidth_gbs"] * memory
    gpu = (np.maximum(frame["op_conv_gflops"] / (frame["conv_tflops"] * 1e3 * compute),
                      frame["op_conv_gb"] / bandwidth)
           + np.maximum(frame["op_mm_gflops"] / (frame["mm_tflops"] * 1e3 * compute),
                        frame["op_mm_gb"] / bandwidth)
           + frame["op_other_gb"] / bandwidth)
    return (frame["steps"] * (gpu + frame["op_kernels"] * per_kernel)).to_numpy()


def test_the_fit_recovers_known_efficiencies_and_prices_an_unseen_architecture_pooled() -> None:
    rng = np.random.default_rng(0)
    seen = _rows(rng, ["V100-16GB", "RTX-3090", "T4"], 300)
    model = RooflineRegressor().fit(seen[list(COLUMNS)], _truth(seen, 0.6, 0.7, 20e-6))
    pooled = model.efficiencies()["pooled"]
    assert pooled["compute_efficiency"] == pytest.approx(0.6, rel=0.05)
    assert pooled["memory_efficiency"] == pytest.approx(0.7, rel=0.05)
    assert pooled["kernel_s"] == pytest.approx(20e-6, rel=0.1)
    hopper = _rows(rng, ["H200", "H100-80GB"], 50)
    ratio = model.predict(hopper[list(COLUMNS)]) / _truth(hopper, 0.6, 0.7, 20e-6)
    assert np.allclose(ratio, 1.0, rtol=0.05)  # its own peak rates, the pooled efficiencies
    assert "hopper" not in model.efficiencies() and ARCHITECTURES.index("hopper") >= 0


def test_efficiencies_never_exceed_their_bound() -> None:
    """Times below what the peaks allow are not explained by efficiencies above them."""
    rng = np.random.default_rng(1)
    rows = _rows(rng, ["A100-80GB"], 100)
    model = RooflineRegressor().fit(rows[list(COLUMNS)], _truth(rows, 0.6, 0.7, 20e-6) / 20)
    for figures in model.efficiencies().values():
        assert figures["memory_efficiency"] <= 1.0 and figures["compute_efficiency"] <= 2.25


@pytest.fixture(scope="module")
def time_frames(data_dir):
    measured = MEASURED_DIR / "H200.csv"
    return (load_target("train-time", data_dir, measurements=measured),
            load_target("infer-time", data_dir, measurements=measured))


def test_a_fold_fits_on_no_row_of_what_it_holds_out(time_frames) -> None:
    train, infer = time_frames
    h200 = infer[infer["gpu"] == "H200"]
    assert not (_held_apart(train, h200, "logo")["gpu"] == "H200").any()
    calibrated = _held_apart(train, h200, "logo-calibrated")
    assert set(calibrated[calibrated["gpu"] == "H200"][["model", "batch"]].itertuples(
        index=False)) == {("resnet50", 32)}
    resnet = infer[infer["model"] == "resnet50"]
    assert "resnet50" not in set(_held_apart(train, resnet, "lomo")["model"])
    assert not set(_held_apart(train, resnet, "lofo")["model"]) & {"resnet18", "resnet152"}


def test_inference_on_the_h200_is_priced_from_training_steps_of_the_authors_cards(
        time_frames) -> None:
    """The held-out figure of the issue (#47): the roofline fitted on the authors' training
    rows only, scored on the H200's measured inference passes, against the forest design."""
    train, infer = time_frames
    design = DESIGNS["infer-time"]["roofline"]
    with pytest.raises(ValueError, match="fits on train-time rows"):
        held_out(design, infer, "logo", n_jobs=1, gpu="H200")
    rows = held_out(design, infer, "logo", n_jobs=1, gpu="H200", fit_frame=train)
    roofline = metrics(rows)
    forest = metrics(held_out(DESIGNS["infer-time"]["ours"], infer, "logo", n_jobs=1, gpu="H200"))
    assert len(rows) == 108 and 0.5 < roofline["ratio_median"] < 2.0
    assert roofline["avg_err_pct"] < forest["avg_err_pct"] / 10
