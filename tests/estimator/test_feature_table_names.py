"""estimator/feature_table.py: a model name the table does not know is answered with the
names it may have meant (case first, then close spellings), not only the whole list."""

from __future__ import annotations

import pytest

from estimator import feature_table
from estimator.errors import UnknownModel
from estimator.feature_table import FeatureTable


def _refusal(model: str, task: str = "train") -> str:
    with pytest.raises(UnknownModel) as refused:
        FeatureTable.load().job_features(model, task, 8)
    return str(refused.value)


def test_a_name_wrong_only_in_case_is_answered_with_the_right_one() -> None:
    message = _refusal("ResNet50")
    assert "did you mean resnet50?" in message
    assert "resnet18" not in message  # the one it means, not the list of every model


def test_a_misspelt_name_is_answered_with_close_spellings() -> None:
    assert "did you mean mobilenet_v2" in _refusal("mobilenetv2")
    assert "did you mean vgg16" in _refusal("VGG-16")


def test_a_name_like_none_still_lists_every_known_model() -> None:
    message = _refusal("gpt5")
    assert "did you mean" not in message
    assert "known models: alexnet," in message and "schedtune features gpt5" in message


def test_close_names_prefers_case_then_spelling_and_never_the_name_itself() -> None:
    close_names = feature_table.close_names
    known = ["resnet50", "resnet18", "vgg16", "ResNet50"]
    assert close_names("RESNET50", known) == ["ResNet50", "resnet50"]
    assert close_names("ResNet50", known) == ["resnet50"]
    assert close_names("resnet5", ["vgg16", "resnet18", "resnet50"], n=1) == ["resnet50"]
    assert close_names("bert", known) == []
