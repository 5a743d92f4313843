"""The time estimate's bias per GPU type and job class, learned from observed runs (pure):
an owner's own job types fully, other owners' runs within `TENANT_BOUND`."""

from __future__ import annotations

import math

import pytest

from extender.core.interference import ObservedRun
from extender.core.time_bias import TENANT_BOUND, bias_key, correct, learn_time_biases
from extender.model import Need

TEAM = "ml/CronJob/nightly"


def _run(gpu: int, start: float, seconds: float, predicted: float, job: str,
         gpu_type: str = "T4", batch: int = 32, owner: str = TEAM) -> ObservedRun:
    return ObservedRun(gpu_type, (("n", gpu),), start, start + seconds, predicted, job, batch,
                       owner)


def _factor(biases: dict, key: str) -> float:
    return math.exp(biases[key][0])


def test_an_owners_job_type_that_ran_three_times_is_predicted_within_ten_percent():
    runs = [_run(i, 0.0, 150.0, 100.0, "train|vgg16") for i in range(3)]
    biases = learn_time_biases(runs, lambda _: 0.5)
    own = _factor(biases, bias_key("T4", "train", "vgg16", 32, owner=TEAM))
    assert own == pytest.approx(1.5, rel=0.10)
    assert biases[bias_key("T4", "train", "vgg16", 32, owner=TEAM)][1] == 3
    # Shared with every other owner: only within the bound.
    assert _factor(biases, bias_key("T4", "train")) == pytest.approx(math.exp(TENANT_BOUND / 2))


def test_the_slowdown_of_sharing_is_not_counted_as_estimate_error():
    # Two runs together on one GPU for their whole life, at alpha 1: each takes 2x alone.
    runs = [_run(0, 0.0, 200.0, 100.0, "train|resnet50"),
            _run(0, 0.0, 200.0, 100.0, "train|resnet50")]
    biases = learn_time_biases(runs, lambda _: 1.0)
    assert biases[bias_key("T4", "train", "resnet50", 32, owner=TEAM)][0] == pytest.approx(
        0.0, abs=1e-9)


def test_levels_are_shrunk_toward_the_one_above_and_classes_stay_apart():
    runs = [_run(i, 0.0, 300.0, 100.0, "inference|vgg16") for i in range(2)]
    runs += [_run(10 + i, 0.0, 100.0, 100.0, "inference|mobilenet") for i in range(6)]
    runs += [_run(20 + i, 0.0, 50.0, 100.0, "train|vgg16") for i in range(4)]
    biases = learn_time_biases(runs, lambda _: 0.5)
    inference = biases[bias_key("T4", "inference", owner=TEAM)][0]
    vgg = biases[bias_key("T4", "inference", "vgg16", owner=TEAM)][0]
    job_type = biases[bias_key("T4", "inference", "vgg16", 32, owner=TEAM)][0]
    assert inference < vgg < job_type < math.log(3.0)
    assert biases[bias_key("T4", "train", owner=TEAM)][0] < 0


def test_runs_recorded_without_an_owner_teach_only_the_bounded_shared_values():
    runs = [ObservedRun("T4", (("n", i),), 0.0, 400.0, 100.0, "train|vgg16") for i in range(9)]
    biases = learn_time_biases(runs, lambda _: 0.5)
    assert all("@" not in key for key in biases)
    assert max(abs(b) for b, _ in biases.values()) == pytest.approx(TENANT_BOUND / 2)


@pytest.mark.parametrize("crafted_s", [5.0, 2000.0])  # 20x fast, 20x slow
def test_one_owners_crafted_runs_move_another_owners_prediction_at_most_the_bound(crafted_s):
    """Tenant B runs resnet50 honestly (1.3x the estimate); tenant A floods the same GPU type
    with 32 crafted runs of the same job type. B's prediction, and that of C who never ran
    it, move by at most exp(TENANT_BOUND) against the same runs without A's."""
    honest = [_run(i, 0.0, 130.0, 100.0, "train|resnet50", owner="b/Job/tune") for i in range(4)]
    crafted = [_run(10 + i, 0.0, crafted_s, 100.0, "train|resnet50", owner="a/Job/flood")
               for i in range(32)]
    needs = {"T4": Need(1000, 100.0)}

    def predicted(runs: list[ObservedRun], owner: str) -> float:
        biases = {k: b for k, (b, _) in learn_time_biases(runs, lambda _: 0.5).items()}
        return correct(needs, "train", "resnet50", biases, 32, owner)["T4"].predicted_s

    for owner in ("b/Job/tune", "c/Job/new"):
        before, after = predicted(honest, owner), predicted(honest + crafted, owner)
        assert abs(math.log(after / before)) <= TENANT_BOUND + 1e-9, owner
    # The flooding tenant's own prediction follows its own runs.
    assert predicted(honest + crafted, "a/Job/flood") == pytest.approx(crafted_s, rel=0.15)


def test_correct_applies_the_most_specific_level_the_owners_first_and_names_it():
    needs = {"T4": Need(1000, 100.0), "A100": Need(1000, 50.0), "L4": Need(1000, 80.0)}
    biases = {bias_key("T4", "inference"): math.log(1.2),
              bias_key("T4", "inference", "vgg16"): math.log(1.1),
              bias_key("T4", "inference", "vgg16", owner=TEAM): math.log(2.0),
              bias_key("T4", "inference", "vgg16", 8, owner=TEAM): math.log(3.0),
              bias_key("A100", "inference"): math.log(0.8)}
    out = correct(needs, "inference", "vgg16", biases, 8, TEAM)
    assert out["T4"].predicted_s == pytest.approx(300.0)
    assert out["T4"].time_factor == pytest.approx(3.0)
    assert out["T4"].time_correction == bias_key("T4", "inference", "vgg16", 8, owner=TEAM)
    assert out["A100"].predicted_s == pytest.approx(40.0)
    assert out["A100"].time_correction == "A100|inference"
    assert out["L4"] == needs["L4"]  # nothing learned there
    assert correct(needs, "inference", "vgg16", biases, 16, TEAM)["T4"].predicted_s == \
        pytest.approx(200.0)  # another batch: the owner's model level
    assert correct(needs, "inference", "vgg16", biases, 8, "x/")["T4"].predicted_s == \
        pytest.approx(110.0)  # another owner: the shared model level
    assert correct(needs, "inference", "other", biases)["T4"].predicted_s == pytest.approx(120.0)
