import pytest

from estimator.errors import InvalidJob, UnknownModel
from estimator.feature_table import MAX_BATCH, FeatureTable, upsert
from estimator.simulation.features import SimulatedPeak


def _peak(batch: int, act: float) -> SimulatedPeak:
    return SimulatedPeak("m", "train", batch, 100.0 + act, 100.0, 0.0, act, 0.0, 0.0, 2.0 * batch)


def test_interpolates_between_and_beyond_cached_batches(tmp_path) -> None:
    (tmp_path / "models.csv").write_text(
        "model,family,params_mb,buffers_mb,activations_mb_per_sample,input_mb_per_sample,"
        "fwd_bwd_mb_per_sample,mult_adds_g_per_sample\nm,f,100,0,10,0.5,20,1\n"
    )
    upsert(tmp_path / "sim_peaks.csv", ["model", "task", "batch"], [_peak(8, 80.0), _peak(16, 160.0)])
    table = FeatureTable.load(tmp_path)
    assert table.job_features("m", "train", 12).sim_activations_mb == pytest.approx(120.0)
    assert table.job_features("m", "train", 32).sim_peak_mb == pytest.approx(420.0)
    assert table.job_features("m", "train", 4).sim_activations_mb == pytest.approx(40.0)
    feats = table.job_features("m", "train", 8)
    assert (feats.activations_mb, feats.input_mb, feats.params_mb) == (80.0, 4.0, 100.0)
    assert feats.torchinfo_total_mb == pytest.approx(100 + 8 * 20.5)
    # Upsert replaces the same key instead of duplicating it.
    upsert(tmp_path / "sim_peaks.csv", ["model", "task", "batch"], [_peak(8, 90.0)])
    assert FeatureTable.load(tmp_path).cached_batches("m", "train") == (8, 16)
    assert FeatureTable.load(tmp_path).job_features("m", "train", 8).sim_activations_mb == 90.0


@pytest.mark.parametrize("batch", [0, -1, MAX_BATCH + 1, 10**12, 8.5, True, "8"])
def test_rejects_absurd_batches(batch) -> None:
    with pytest.raises(InvalidJob, match="batch size"):
        FeatureTable.load().job_features("resnet18", "train", batch)


def test_rejects_unknown_task_and_model() -> None:
    table = FeatureTable.load()
    with pytest.raises(InvalidJob, match="train, inference"):
        table.job_features("resnet18", "finetune", 8)
    with pytest.raises(UnknownModel, match="schedtune features"):
        table.job_features("not-a-model", "train", 8)


def test_committed_cache_covers_every_registered_model() -> None:
    from estimator.zoo import MODEL_NAMES

    table = FeatureTable.load()
    for name in MODEL_NAMES:
        assert table.tasks_for(name) == ("train", "inference"), name


def test_device_shares_are_derived_from_the_cached_columns() -> None:
    feats = FeatureTable.load().job_features("vgg13", "train", 32)
    assert feats.sim_workspace_share == pytest.approx(
        feats.sim_workspace_max_mb / feats.sim_device_mb)
    assert feats.sim_fragmentation_share == pytest.approx(
        (feats.sim_reserved_mb - feats.sim_allocated_mb) / feats.sim_device_mb)
    assert feats.sim_device_mb > feats.sim_reserved_mb > feats.sim_allocated_mb > 0


def test_a_table_without_the_device_columns_says_how_to_refresh_it(tmp_path) -> None:
    (tmp_path / "models.csv").write_text(
        "model,family,params_mb,buffers_mb,activations_mb_per_sample,input_mb_per_sample,"
        "fwd_bwd_mb_per_sample,mult_adds_g_per_sample\nm,f,100,0,10,0.5,20,1\n"
    )
    (tmp_path / "sim_peaks.csv").write_text(
        "model,task,batch,sim_peak_mb,sim_params_mb,sim_grads_mb,sim_activations_mb,"
        "sim_temp_mb,sim_optimizer_mb,sim_gflops\nm,train,8,1,1,1,1,1,1,1\n")
    with pytest.raises(ValueError, match="--device-only"):
        FeatureTable.load(tmp_path)
