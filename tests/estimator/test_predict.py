import json
import shutil

import pytest

from estimator.catalogue import CATALOGUE
from estimator.errors import ArtefactError, InvalidJob, UnknownGPU, UnknownModel
from estimator.fitting import artefacts
from estimator.predict import Estimator, Job


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.load()


def test_one_call_covers_every_gpu_type(estimator) -> None:
    out = estimator.estimate(Job("vgg16", "train", 64), free_mib={"RTX-3070": 8192, "RTX-3090": 24576})
    assert set(out) == set(CATALOGUE)
    small, big = out["RTX-3070"], out["RTX-3090"]
    assert small.fits is False and big.fits is True  # the paper's example: 8 GB refuses vgg16/64
    assert out["A100-80GB"].fits is None  # no free memory given for that type
    for e in out.values():
        assert e.padded_mib == pytest.approx(e.predicted_mib * (1 + e.pad))
        assert e.predicted_s > 0
    assert small.seen_in_training and not out["H100-80GB"].seen_in_training


def test_time_scales_with_epochs_and_memory_with_batch(estimator) -> None:
    one = estimator.estimate(Job("resnet50", "train", 32, 1), gpus=["V100-16GB"])["V100-16GB"]
    ten = estimator.estimate(Job("resnet50", "train", 32, 10), gpus=["V100-16GB"])["V100-16GB"]
    bigger = estimator.estimate(Job("resnet50", "train", 64, 1), gpus=["V100-16GB"])["V100-16GB"]
    assert ten.predicted_s == pytest.approx(10 * one.predicted_s)
    assert bigger.predicted_mib > one.predicted_mib


def test_warm_predicts_every_profiled_job_as_a_single_call_would() -> None:
    lazy, warm = Estimator.load(), Estimator.load()
    profiled = sum(len(warm.table.cached_batches(m, t)) for m in warm.models
                   for t in warm.table.tasks_for(m))  # fmt: skip
    assert warm.warm() == profiled > 100
    assert warm.warm() == 0  # nothing left to predict
    for model, task in (("vgg16", "train"), ("bert_base", "inference")):
        batch = warm.table.cached_batches(model, task)[-1]
        job = Job(model, task, batch, 3)
        for gpu, e in warm.estimate(job).items():  # batched: equal up to float rounding
            single = lazy.estimate(job)[gpu]
            assert (e.padded_mib, e.predicted_s) == pytest.approx(
                (single.padded_mib, single.predicted_s), rel=1e-12)


def test_unknown_gpu_falls_back_to_the_worst_case(estimator) -> None:
    job = Job("resnet18", "inference", 1, 100)
    every = estimator.estimate(job)
    fallback = estimator.estimate_unknown(job, free_mib=100_000)
    assert fallback.padded_mib == max(e.padded_mib for e in every.values())
    assert fallback.predicted_s == max(e.predicted_s for e in every.values())
    assert fallback.fits is True and not fallback.seen_in_training
    with pytest.raises(UnknownGPU):
        estimator.estimate(job, gpus=["GTX-480"])


@pytest.mark.parametrize("job", [
    lambda: Job("resnet18", "train", -1), lambda: Job("resnet18", "train", 10**12),
    lambda: Job("resnet18", "pretrain", 8), lambda: Job("resnet18", "train", 8, 0),
])
def test_bad_jobs_are_refused_with_a_reason(estimator, job) -> None:
    with pytest.raises(InvalidJob):
        estimator.estimate(job())


def test_unknown_model_says_how_to_add_it(estimator) -> None:
    with pytest.raises(UnknownModel, match="schedtune features"):
        estimator.estimate(Job("gpt5", "train", 8))


def test_artefacts_carry_metadata_and_refuse_other_versions(tmp_path, monkeypatch) -> None:
    _, meta = artefacts.load("train-mem.ours")
    assert {"columns", "pad_seen", "data_sha256", "versions", "held_out"} <= set(meta)
    assert meta["held_out"]["lomo"]["under_alloc_pct"] == 0.0
    with pytest.raises(ArtefactError, match="outside"):
        artefacts.load("train-mem.ours", tmp_path)
    # A stale artefact, in a trusted directory of its own (never the committed profiles/).
    trusted = tmp_path / "models"
    trusted.mkdir()
    shutil.copy(artefacts.MODELS_DIR / "train-mem.ours.joblib", trusted / "test-stale.ours.joblib")
    meta["versions"]["sklearn"] = "0.0.1"
    (trusted / "test-stale.ours.json").write_text(json.dumps(meta))
    monkeypatch.setattr(artefacts, "MODELS_DIR", trusted)
    with pytest.raises(ArtefactError, match="retrain"):
        artefacts.load("test-stale.ours", trusted)


def test_request_path_imports_neither_torch_nor_scikit_learn() -> None:
    """The service's start is its imports: torch, scikit-learn, SciPy and pandas stay out."""
    import subprocess
    import sys

    code = ("import sys; from estimator.predict import Estimator, Job; "
            "Estimator.load().estimate(Job('resnet50','train',32)); "
            "print(sorted(m for m in ('torch', 'sklearn', 'scipy', 'pandas', 'joblib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_model_of_an_unseen_family_is_padded_beside_its_workspace_range(estimator) -> None:
    """A seen family keeps its plain pad; an unseen one gets the larger of the family pad
    and its simulated workspace range with that range's own pad."""
    from dataclasses import replace

    from estimator.padding import padded_unseen_family, workspace_range

    meta = estimator.metadata()["train-mem"]
    seen = estimator.estimate(Job("resnet50", "train", 32), gpus=["V100-16GB"])["V100-16GB"]
    assert seen.family_seen and seen.pad == pytest.approx(meta["pad_seen"])
    # VGG as a family the rows never saw: its wide convolutions' workspace decides.
    without_vgg = Estimator(estimator.table, {
        target: replace(p, meta={**p.meta, "seen_families": ["densenet", "resnet"]})
        for target, p in estimator._predictors.items()})
    unseen = [m for m in estimator.models if estimator.table.family(m) not in
              meta["seen_families"] and "train" in estimator.table.tasks_for(m)]
    assert unseen  # ViT, Swin, ConvNeXt, BERT...
    margins = 0
    for source, model in [(estimator, m) for m in unseen] + [(without_vgg, "vgg16")]:
        for batch in estimator.table.cached_batches(model, "train"):
            features = estimator.table.job_features(model, "train", batch)
            workspace = workspace_range(features.sim_workspace_mb, features.sim_workspace_max_mb)
            for e in source.estimate(Job(model, "train", batch), gpus=["V100-16GB", "T4"]).values():
                assert not e.family_seen
                pad = meta["pad_seen" if e.seen_in_training else "pad_unseen_gpu"]
                want = padded_unseen_family(e.predicted_mib, workspace, pad, meta)
                assert e.padded_mib == pytest.approx(float(want))
                assert e.padded_mib == pytest.approx(e.predicted_mib * (1 + e.pad))
                assert e.padded_mib >= e.predicted_mib * (1 + meta["pad_unseen_family"]) \
                    + meta["pad_unseen_family_mib"] - 1e-6
                margins += e.padded_mib > max(
                    e.predicted_mib * (1 + pad),
                    e.predicted_mib * (1 + meta["pad_unseen_family"])
                    + meta["pad_unseen_family_mib"]) + 1
    assert margins  # the workspace margin decides for VGG's larger batches


def test_a_seen_family_on_an_unseen_gpu_type_gets_its_workspace_range_too(estimator) -> None:
    """A GPU type no row covers (the L4) gets the larger of the plain unseen-GPU pad and
    the workspace pair (measured on the H200 before it had a fit of its own: VGG-16
    training at batch 64 held 12,199 MiB, more than the plain pad gave). A seen GPU type
    keeps the plain pad."""
    from estimator.padding import workspace_range

    meta = estimator.metadata()["train-mem"]
    features = estimator.table.job_features("vgg16", "train", 64)
    workspace = workspace_range(features.sim_workspace_mb, features.sim_workspace_max_mb)
    out = estimator.estimate(Job("vgg16", "train", 64), gpus=["L4", "V100-16GB"])
    l4, v100 = out["L4"], out["V100-16GB"]
    assert l4.family_seen and not l4.seen_in_training and v100.seen_in_training
    plain = l4.predicted_mib * (1 + meta["pad_unseen_gpu"])
    pair = (l4.predicted_mib * (1 + meta["pad_unseen_family_workspace"])
            + meta["pad_unseen_family_workspace_mib"] + workspace)
    assert l4.padded_mib == pytest.approx(max(plain, pair)) and pair > plain
    assert v100.padded_mib == pytest.approx(v100.predicted_mib * (1 + meta["pad_seen"]))


def test_a_card_profiled_on_another_stack_is_sized_by_its_own_fit(estimator) -> None:
    """The H200's profiled rows (profiles/measured/H200.csv) have an artefact of their own
    (`estimator.fitting.own_fits`): seen, padded by its own held-out pad, covering what
    VGG-16 training at batch 64 held there (12,199 MiB); the reference cards keep the
    shared artefact and its pad."""
    import json

    from estimator.fitting.artefacts import MODELS_DIR

    own = json.loads((MODELS_DIR / "train-mem.ours.H200.json").read_text())
    out = estimator.estimate(Job("vgg16", "train", 64), gpus=["H200", "V100-16GB"])
    h200, v100 = out["H200"], out["V100-16GB"]
    assert h200.seen_in_training and h200.pad == pytest.approx(own["pad_seen"])
    assert 12_199 <= h200.padded_mib
    assert v100.pad == pytest.approx(estimator.metadata()["train-mem"]["pad_seen"])
    assert own["pad_seen"] > estimator.metadata()["train-mem"]["pad_seen"]


def test_time_on_a_type_no_time_artefact_saw_comes_from_its_own_peak_rates(tmp_path) -> None:
    """Seen types keep the trained time artefacts; every other catalogue type is priced by
    the roofline from its own data-sheet rates, so two unseen types differ as their
    hardware does; without the roofline artefacts (or traced operations) nothing changes."""
    from estimator import portable
    from estimator.feature_table import FeatureTable

    served = Estimator.load()
    job = Job("resnet50", "train", 32, 2)
    times = {g: e.predicted_s for g, e in served.estimate(job).items()}
    seen = set(served.metadata()["train-time"]["seen_gpus"])
    shutil.copytree(portable.MODELS_DIR, tmp_path / "models")
    for path in (tmp_path / "models").glob("*.roofline.*"):
        path.unlink()
    without = Estimator.load(models_dir=tmp_path / "models")
    before = {g: e.predicted_s for g, e in without.estimate(job).items()}
    assert {g for g in CATALOGUE if times[g] == before[g]} == seen
    assert times["H200"] < times["A100-80GB"] < times["T4"]  # 4.8, 2.0, 0.3 TB/s
    assert times["H100-80GB"] != times["H200"]  # same compute, different bandwidth
    # A model without traced operations (users' own models) keeps the time artefacts.
    table = FeatureTable.load()
    summary, sims = table.rows_of("resnet50")
    untraced = Estimator(table.with_models({"mine": {**summary, "model": "mine"}},
                                           {("mine", t): rows for t, rows in sims.items()}),
                         served._predictors, served._hardware)
    mine = untraced.estimate(Job("mine", "train", 32, 2))
    assert mine["H200"].predicted_s == pytest.approx(before["H200"])


def test_a_family_new_to_a_cards_own_fit_is_padded_at_least_as_the_shared_fit_pads_one(
        estimator) -> None:
    """The ResNets as a family the H200's own fit never saw: padded to the larger of its own
    unseen-family rule and the shared fit's affine unseen-family pad (which decides here:
    32 % against the own fit's 20 %); a family it saw keeps its own seen pad."""
    from dataclasses import replace

    from estimator.padding import affine_family_padded, padded_unseen_family, workspace_range

    own = estimator._own["train-mem"]["H200"]
    families = [f for f in own.meta["seen_families"] if f != "resnet"]
    without_resnets = Estimator(estimator.table, estimator._predictors, estimator._hardware, {
        **estimator._own, "train-mem": {"H200": replace(own, meta={
            **own.meta, "seen_families": families})}})
    shared = estimator.metadata()["train-mem"]
    features = estimator.table.job_features("resnet18", "train", 32)
    workspace = workspace_range(features.sim_workspace_mb, features.sim_workspace_max_mb)
    h200 = without_resnets.estimate(Job("resnet18", "train", 32), gpus=["H200"])["H200"]
    alone = float(padded_unseen_family(h200.predicted_mib, workspace, own.meta["pad_seen"],
                                       own.meta))
    floor = float(affine_family_padded(h200.predicted_mib, shared))
    assert not h200.family_seen and floor > alone
    assert h200.padded_mib == pytest.approx(floor)
    seen = estimator.estimate(Job("resnet18", "train", 32), gpus=["H200"])["H200"]
    assert seen.family_seen and seen.pad == pytest.approx(own.meta["pad_seen"])
