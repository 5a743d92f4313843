"""The numpy form of every trained artefact predicts exactly what scikit-learn predicts."""

import numpy as np
import pytest

from estimator import portable
from estimator.errors import ArtefactError
from estimator.fitting import artefacts
from estimator.fitting.compiling import compile_regressor
from estimator.fitting.regressors import DESIGNS
from estimator.predict import HARDWARE_DESIGN, MEMORY_TARGETS, TIME_TARGETS, Estimator, _Predictor

TARGETS = (*MEMORY_TARGETS.values(), *TIME_TARGETS.values())


def _jobs(estimator: Estimator, task: str) -> list[tuple[str, str, int]]:
    return [(m, task, b) for m in estimator.models if task in estimator.table.tasks_for(m)
            for b in estimator.table.cached_batches(m, task)]


@pytest.mark.parametrize("design", ["ours", "paper-rfr"])
def test_committed_numpy_artefacts_equal_the_pickled_ones_bit_for_bit(design) -> None:
    """Every profiled job on every catalogue GPU (unseen types included), as the service
    computes it: a stale or wrongly compiled .npz fails here."""
    served = Estimator.load(design=design)
    own = {target: {path.stem.rpartition(".")[2]: _Predictor(*artefacts.load(path.stem))
                    for path in artefacts.MODELS_DIR.glob(f"{target}.{design}.*.joblib")}
           for target in MEMORY_TARGETS.values()}  # the cards fitted on their own rows
    pickled = Estimator(served.table, {
        target: _Predictor(*artefacts.load(f"{target}.{design}")) for target in TARGETS}, {
        target: _Predictor(*artefacts.load(f"{target}.{HARDWARE_DESIGN}"))
        for target in TIME_TARGETS.values()}, own)
    for task in ("train", "inference"):
        jobs = _jobs(served, task)
        assert jobs
        assert served._compute_many(task, jobs) == pickled._compute_many(task, jobs)


@pytest.mark.parametrize(("target", "design"),
                         [(t, d) for t, designs in DESIGNS.items() for d in designs])
def test_every_design_compiles_and_round_trips(tmp_path, target, design) -> None:
    """Fitted on random rows (the GPU column is a code), saved, loaded: same predictions, also
    for inputs far outside the fitted range and for a GPU code never fitted."""
    spec = DESIGNS[target][design]
    rng = np.random.default_rng(1)
    X = rng.uniform(1, 500, (120, len(spec.columns)))
    if "gpu_code" in spec.columns:
        X[:, spec.columns.index("gpu_code")] = rng.integers(0, 4, len(X))
    y = X[:, 0] * 2 + rng.uniform(100, 200, len(X))
    fitted = spec.make().fit(X, y)
    path = portable.save(tmp_path / "model.npz", compile_regressor(fitted))
    (tmp_path / "model.json").write_text("{}")
    loaded, meta = portable.load("model", tmp_path)
    probe = np.vstack([X, rng.uniform(0, 5000, X.shape)])
    if "gpu_code" in spec.columns:
        probe[-1, spec.columns.index("gpu_code")] = 9.0  # never fitted: the unseen constants
    assert meta == {} and path.is_file()
    np.testing.assert_array_equal(loaded.predict(probe), fitted.predict(probe))


def test_an_unknown_regressor_is_refused_at_training_time() -> None:
    from sklearn.linear_model import LinearRegression

    with pytest.raises(TypeError, match="LinearRegression"):
        compile_regressor(LinearRegression().fit([[0.0], [1.0]], [0.0, 1.0]))


def test_save_writes_the_numpy_form_beside_the_pickle(tmp_path, monkeypatch) -> None:
    fitted, meta = artefacts.load("infer-mem.ours")
    monkeypatch.setattr(artefacts, "MODELS_DIR", tmp_path)
    artefacts.save("copy.ours", fitted, meta, tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"copy.ours.joblib", "copy.ours.npz",
                                                     "copy.ours.json"}
    loaded, _ = portable.load("copy.ours", tmp_path)
    X = np.random.default_rng(2).uniform(1, 1000, (50, len(meta["columns"])))
    np.testing.assert_array_equal(loaded.predict(X), fitted.predict(X))


def test_missing_corrupt_or_pickled_files_are_refused(tmp_path) -> None:
    with pytest.raises(ArtefactError, match="missing"):
        portable.load("absent", tmp_path)
    (tmp_path / "bad.json").write_text("{}")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ArtefactError, match="corrupt"):
        portable.load("bad", tmp_path)
    np.savez(tmp_path / "bad.npz", kind=np.array([object()], dtype=object))  # a pickle inside
    with pytest.raises(ArtefactError, match="corrupt"):
        portable.load("bad", tmp_path)
    np.savez(tmp_path / "bad.npz", kind=np.array("quantum-forest"))
    with pytest.raises(ArtefactError, match="unknown regressor kind"):
        portable.load("bad", tmp_path)
