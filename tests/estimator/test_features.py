"""The feature recipe against the authors' data, and the simulated peak."""

import pandas as pd
import pytest

from estimator import features
from estimator.data import PAPER_DIR
from estimator.feature_table import FeatureTable


@pytest.fixture(scope="module")
def paper_rows(data_dir):
    df = pd.read_csv(data_dir / PAPER_DIR / "model_stats.csv")
    return df[df["batchsize"] == 8].drop_duplicates("model").set_index("model")


@pytest.mark.parametrize("model", ["resnet18", "resnet50", "vgg11", "vgg16"])
def test_params_and_input_match_the_data(paper_rows, model) -> None:
    summary = features.summarize(model)
    row = paper_rows.loc[model]
    assert summary.params_mb == pytest.approx(row["parameters"], abs=0.01)
    assert summary.input_mb_per_sample * 8 == pytest.approx(row["input"], abs=0.02)
    # Activations: sum of leaf outputs of one forward pass (paper IV-D); close for ResNet/VGG.
    assert summary.activations_mb_per_sample * 8 == pytest.approx(row["activations"], rel=0.05)


def test_densenet_parameters_count_batchnorm_statistics(paper_rows) -> None:
    summary = features.summarize("densenet121")
    row = paper_rows.loc["densenet121"]
    assert summary.params_mb != pytest.approx(row["parameters"], abs=0.01)
    assert summary.params_mb + summary.buffers_mb == pytest.approx(row["parameters"], abs=0.02)


def test_simulated_peak_is_cached_exactly_and_grows_with_batch() -> None:
    small, large = features.simulate_peaks("resnet18", "train", [8, 16])
    cached = FeatureTable.load().job_features("resnet18", "train", 8)
    assert small.sim_peak_mb == pytest.approx(cached.sim_peak_mb, abs=1e-3)
    assert large.sim_activations_mb == pytest.approx(2 * small.sim_activations_mb, rel=0.01)
    # Training holds weights, gradients and momentum; inference only weights.
    assert small.sim_optimizer_mb == pytest.approx(small.sim_params_mb, rel=0.01)
    (infer,) = features.simulate_peaks("resnet18", "inference", [8])
    assert infer.sim_grads_mb == 0 and infer.sim_peak_mb < small.sim_peak_mb


def test_simulation_rejects_bad_task_and_batch() -> None:
    with pytest.raises(ValueError, match="task"):
        features.simulate_peaks("resnet18", "finetune", [8])
    with pytest.raises(ValueError, match="batch"):
        features.simulate_peaks("resnet18", "train", [0])
