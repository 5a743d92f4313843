"""Worlds no estimator wrote: a fixed error per job type and GPU, a collocation law that
is not the one ours plays forward, and trace pods that bring their own truth."""

from __future__ import annotations

import pytest

from replay.interference import Pairwise, Uniform, gavel_key, gavel_pairwise, load_pairs
from replay.scenario import Scenario
from replay.world import Perturbation, SimJob, World

JOB = SimJob(0, 0, "resnet50", "train", 32, 2)


def test_the_perturbation_is_fixed_per_job_type_and_gpu_and_differs_by_seed() -> None:
    one, two = Perturbation(1), Perturbation(2)
    keys = [(m, "train", b, g) for m in ("resnet18", "vgg16", "densenet121") for b in (8, 32)
            for g in ("RTX-3090", "RTX-2070S")]
    factors = [one.memory(k) for k in keys]
    assert factors == [Perturbation(1).memory(k) for k in keys]  # fixed, not redrawn
    assert all(0.85 <= f <= 1.25 for f in factors) and len(set(factors)) == len(keys)
    assert factors != [two.memory(k) for k in keys]
    assert all(0.2 < one.time(k) < 5 for k in keys)


def test_a_perturbed_world_scales_the_reference_truth(data_dir) -> None:
    plain = Scenario("reference", data_dir).build_world(["RTX-3090"])
    perturbed = Scenario("perturbed", data_dir, world_seed=3).build_world(["RTX-3090"])
    key = ("resnet50", "train", 32, "RTX-3090")
    factor = Perturbation(3).memory(key)
    assert perturbed.peak_mib(JOB, "RTX-3090") == pytest.approx(
        plain.peak_mib(JOB, "RTX-3090") * factor)
    assert perturbed.reference_s(JOB, "RTX-3090") == pytest.approx(
        plain.reference_s(JOB, "RTX-3090") * Perturbation(3).time(key))
    assert isinstance(perturbed.interference, Pairwise)
    assert isinstance(plain.interference, Uniform)
    assert perturbed.describe()["perturbation"].startswith("seed 3")


def test_uniform_is_pairwise_with_one_alpha() -> None:
    jobs = [JOB, SimJob(1, 0, "vgg16", "train", 8, 1), SimJob(2, 0, "resnet18", "inference", 1, 1)]
    assert Uniform(0.5).speeds("T4", jobs) == pytest.approx([0.5, 0.5, 0.5])
    assert Pairwise({"T4": 0.5}).speeds("T4", jobs) == pytest.approx([0.5, 0.5, 0.5])
    assert Uniform(0.5).speeds("T4", jobs[:1]) == [1.0]


def test_gavel_pairs_are_asymmetric_where_both_jobs_map(data_dir) -> None:
    assert gavel_key(SimJob(0, 0, "resnet18", "train", 8, 1)) == "ResNet-18 (batch size 16)"
    assert gavel_key(SimJob(0, 0, "resnet18", "inference", 1, 1)) == ""
    pairs = load_pairs(data_dir)
    assert pairs, "Gavel's measured pairs are read from the data directory"
    law = Pairwise({"RTX-3090": 0.6}, {"RTX-3090": "v100"}, pairs)
    small, large = SimJob(0, 0, "resnet18", "train", 16, 1), SimJob(1, 0, "resnet50", "train", 64, 1)
    fast, slow = law.speeds("RTX-3090", [small, large])
    assert fast != slow  # each slowed by what it shares with, as measured
    other = SimJob(2, 0, "vgg16", "train", 8, 1)
    assert law.speeds("RTX-3090", [small, other]) == pytest.approx([1 / 1.6, 1 / 1.6])


def test_each_gpu_type_gets_its_own_seeded_alpha() -> None:
    law = gavel_pairwise(5, ["RTX-2070S", "RTX-3070", "RTX-3090"], None)
    assert law == gavel_pairwise(5, ["RTX-3090", "RTX-3070", "RTX-2070S"], None)
    assert all(0.47 * 0.75 - 1e-9 <= a <= 0.87 * 1.33 + 1e-9 for a in law.alpha_by_type.values())
    assert law != gavel_pairwise(6, ["RTX-2070S", "RTX-3070", "RTX-3090"], None)


def test_a_trace_pod_brings_its_own_truth() -> None:
    world = World("trace", startup_s=0, estimator=None)  # type: ignore[arg-type]
    pod = SimJob(0, 0, "", "", 0, 1, gpus=2, declared_mib=5000, duration_s=300,
                 gpu_types=("T4",))
    assert world.peak_mib(pod, "T4") == 5000 and world.run_s(pod, "T4") == 300
    assert pod.may_run_on("T4") and not pod.may_run_on("A10")
