"""The time estimate's bias per GPU type and job class, learned from observed runs (pure)."""

from __future__ import annotations

import math

import pytest

from extender.core.interference import ObservedRun
from extender.core.time_bias import bias_key, correct, learn_time_biases
from extender.model import Need


def _run(gpu: int, start: float, seconds: float, predicted: float, job: str,
         gpu_type: str = "T4") -> ObservedRun:
    return ObservedRun(gpu_type, (("n", gpu),), start, start + seconds, predicted, job)


def test_runs_alone_that_take_twice_the_estimate_teach_a_factor_of_two():
    runs = [_run(i, 0.0, 200.0, 100.0, "inference|vgg16") for i in range(8)]
    biases = learn_time_biases(runs, lambda _: 0.5)
    factor, runs_used = math.exp(biases[bias_key("T4", "inference")][0]), 8
    assert factor == pytest.approx(2.0 ** (8 / 10), rel=1e-6)  # shrunk by 2 pseudo-runs
    assert biases[bias_key("T4", "inference")][1] == runs_used
    assert bias_key("T4", "inference", "vgg16") in biases


def test_the_slowdown_of_sharing_is_not_counted_as_estimate_error():
    # Two runs together on one GPU for their whole life, at alpha 1: each takes 2x alone.
    runs = [_run(0, 0.0, 200.0, 100.0, "train|resnet50"),
            _run(0, 0.0, 200.0, 100.0, "train|resnet50")]
    biases = learn_time_biases(runs, lambda _: 1.0)
    assert biases[bias_key("T4", "train")][0] == pytest.approx(0.0, abs=1e-9)


def test_a_model_is_shrunk_toward_its_class_and_classes_stay_apart():
    runs = [_run(i, 0.0, 300.0, 100.0, "inference|vgg16") for i in range(2)]
    runs += [_run(10 + i, 0.0, 100.0, 100.0, "inference|mobilenet") for i in range(6)]
    runs += [_run(20 + i, 0.0, 50.0, 100.0, "train|vgg16") for i in range(4)]
    biases = learn_time_biases(runs, lambda _: 0.5)
    inference = biases[bias_key("T4", "inference")][0]
    vgg = biases[bias_key("T4", "inference", "vgg16")][0]
    assert inference < vgg < math.log(3.0)
    assert biases[bias_key("T4", "train")][0] < 0


def test_correct_multiplies_predicted_seconds_by_the_most_specific_bias():
    needs = {"T4": Need(1000, 100.0), "A100": Need(1000, 50.0), "L4": Need(1000, 80.0)}
    biases = {bias_key("T4", "inference"): math.log(2.0),
              bias_key("T4", "inference", "vgg16"): math.log(3.0),
              bias_key("A100", "inference"): math.log(0.5)}
    out = correct(needs, "inference", "vgg16", biases)
    assert out["T4"].predicted_s == pytest.approx(300.0)
    assert out["T4"].time_factor == pytest.approx(3.0)
    assert out["A100"].predicted_s == pytest.approx(25.0)
    assert out["L4"] == needs["L4"]  # nothing learned there
    assert correct(needs, "inference", "other", biases)["T4"].predicted_s == pytest.approx(200.0)
