"""Held-out artefacts: each fold trained by the estimator's own code without its model or
family, into a cache outside profiles/, and reused while rows and code are unchanged."""

from __future__ import annotations

import json

from estimator.predict import Estimator, Job
from estimator.zoo import REGISTRY
from replay.folds import fold_of, load_estimators, train_folds


def test_folds_are_named_by_model_or_family() -> None:
    assert fold_of("vgg16", "lomo") == "vgg16"
    assert fold_of("vgg16", "lofo") == REGISTRY["vgg16"].family == "vgg"
    assert fold_of("not-registered", "lofo") == "not-registered"


def test_each_family_fold_never_saw_its_family(data_dir, tmp_path) -> None:
    dirs = train_folds("lofo", data_dir, tmp_path, workers=1)
    assert set(dirs) == {"resnet", "densenet", "vgg"}
    assert all(tmp_path in d.parents for d in dirs.values())
    for fold, directory in dirs.items():
        for meta_path in directory.glob("*.json"):
            if meta_path.name == "fold.json":
                continue
            meta = json.loads(meta_path.read_text())
            assert meta["models"], meta_path
            assert not [m for m in meta["models"] if fold_of(m, "lofo") == fold], meta_path
            assert meta["held_out"] == {"protocol": "lofo", "fold": fold}
    stamps = {f: (d / "fold.json").stat().st_mtime_ns for f, d in dirs.items()}
    again = train_folds("lofo", data_dir, tmp_path, workers=1)
    assert again == dirs and stamps == {f: (d / "fold.json").stat().st_mtime_ns
                                        for f, d in again.items()}  # cached, not retrained
    held_out = load_estimators(dirs, "ours")["vgg"]
    committed = Estimator.load()
    job = Job("vgg16", "train", 32, 1)
    fold_mib = held_out.estimate(job, gpus=["RTX-3090"])["RTX-3090"].predicted_mib
    seen_mib = committed.estimate(job, gpus=["RTX-3090"])["RTX-3090"].predicted_mib
    assert fold_mib != seen_mib  # a different regressor decides for VGG jobs


def test_the_cache_key_names_the_code_of_the_estimators_subpackages_too(tmp_path,
                                                                       monkeypatch) -> None:
    from replay import folds

    (tmp_path / "reference").mkdir()
    (tmp_path / "top.py").write_text("a = 1\n")
    (tmp_path / "reference" / "tables.py").write_text("b = 1\n")
    monkeypatch.setattr(folds, "ESTIMATOR_SOURCE", tmp_path)
    before = folds.digest({})
    (tmp_path / "reference" / "tables.py").write_text("b = 2\n")
    assert folds.digest({}) != before
