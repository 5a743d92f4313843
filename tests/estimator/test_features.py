"""The feature recipe against the authors' data, and the simulated peak."""

import pandas as pd
import pytest

from estimator.simulation import features
from estimator.reference.tables import PAPER_DIR
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


def test_device_memory_is_cached_exactly_and_holds_more_than_the_tensors() -> None:
    (small,) = features.simulate_device("resnet18", "train", [8])
    cached = FeatureTable.load().job_features("resnet18", "train", 8)
    for column in ("sim_allocated_mb", "sim_reserved_mb", "sim_workspace_mb", "sim_device_mb"):
        assert getattr(small, column) == pytest.approx(getattr(cached, column), abs=1e-3), column
    assert small.sim_reserved_mb >= small.sim_allocated_mb
    assert small.sim_device_mb == pytest.approx(small.sim_reserved_mb + small.sim_workspace_mb)
    (infer,) = features.simulate_device("resnet18", "inference", [8])
    assert infer.sim_allocated_mb < small.sim_allocated_mb


def test_large_activations_fragment_the_allocator_more() -> None:
    """VGG's 224x224x64 tensors leave cached segments no later tensor fits: the reason its
    measured overhead above the tensors is twice the ResNets' (issue #15)."""
    (vgg,) = features.simulate_device("vgg11", "train", [16])
    (resnet,) = features.simulate_device("resnet18", "train", [16])
    assert vgg.sim_largest_alloc_mb > 4 * resnet.sim_largest_alloc_mb
    vgg_extra = vgg.sim_reserved_mb - vgg.sim_allocated_mb
    resnet_extra = resnet.sim_reserved_mb - resnet.sim_allocated_mb
    assert vgg_extra > 4 * resnet_extra and vgg_extra > 300


def test_the_trace_frees_what_the_loop_drops() -> None:
    import torch
    from torch import nn
    from torch._subclasses.fake_tensor import FakeTensorMode

    from estimator.simulation.allocator_trace import record

    mode = FakeTensorMode()
    model = features._fake_copy(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(),
                                              nn.Linear(8 * 30 * 30, 10)), mode)
    with mode:
        events = record(model, lambda: (torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))),
                        "train", lambda out, labels: nn.functional.cross_entropy(out, labels))
    sizes, live = {}, 0
    for kind, key, nbytes in events:
        if kind == "alloc":
            sizes[key] = nbytes
            live += nbytes
        elif kind == "free":
            live -= sizes.pop(key)
    params = sum(p.numel() * 4 for p in model.parameters())
    assert live == 3 * params  # weights, gradients (kept: set_to_none=False), momentum
    convs = [key for kind, key, _ in events if kind == "conv"]
    assert [c.pass_ for c in convs] == ["fwd", "bwd"] * 3
    assert convs[0].kernel == (3, 3) and convs[0].input_bytes == 4 * 3 * 32 * 32 * 4
