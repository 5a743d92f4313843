"""A model defined in a user's own Python file, registered with one command, is estimated
and scheduled by two running extender replicas without a restart (real Redis, real torch)."""

from __future__ import annotations

import json
import time

import pytest

from estimator.predict import Estimator, Job
from extender.registry import ModelRegistry
from extender.sizing import Sizer
from extender.state.store import RedisStore
from extender.model import RESERVED_MIB, SIZING
from extender.settings import Settings
from extender.web.app import create_app
from scripts import models
from tests.builders import bind_args, filter_args, make_node, make_pod
from tests.extender.conftest import FakeClock, RecordingBinder

NODE = make_node("a100", "NVIDIA-A100-SXM4-40GB", count=2, memory_mib=40960, replicas=4)
USER_CODE = '''
from torch import nn


def build():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def not_a_model():
    return 42
'''


@pytest.fixture
def env(monkeypatch, redis_url, redis_client, tmp_path):
    monkeypatch.setenv("REDIS_URL", redis_url)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "tinynet.py").write_text(USER_CODE)
    return tmp_path


def _replica(redis_url: str):
    settings = Settings(redis_url=redis_url, bind_mode="record", node_watch=False,
                        log_level="WARNING")
    binder = RecordingBinder()
    app = create_app(settings, binder=binder, clock=FakeClock(), estimator=Estimator.load())
    return app.test_client(), binder


def _filter(client, pod) -> dict:
    return client.post("/filter", json=filter_args(pod, [NODE])).get_json()


def test_a_users_model_is_registered_once_and_placed_by_every_replica(env, redis_url, capsys,
                                                                       monkeypatch) -> None:
    first, _ = _replica(redis_url)
    second, binder = _replica(redis_url)
    pod = make_pod(model="tinynet", batch=24)
    refused = _filter(first, pod)["FailedAndUnresolvableNodes"]["a100"]
    assert "schedtune models add tinynet" in refused and "schedtune.io/gpu-memory" in refused

    assert models.main(["add", "tinynet", "--entry-point", "tinynet:build", "--path",
                        str(env / "src"), "--input", "image:3x64x64", "--classes", "10",
                        "--export", str(env / "out")]) == 0
    exported = json.loads((env / "out" / "tinynet.json").read_text())
    assert exported["kind"] == "entry-point" and exported["family"] == "user:tinynet"
    assert set(exported["sims"]) == {"train", "inference"}

    for replica in (first, second):  # both estimate it now, neither restarted
        assert [n["metadata"]["name"] for n in _filter(replica, pod)["Nodes"]["items"]] == ["a100"]
    assert second.post("/bind", json=bind_args(pod, "a100")).get_json() == {"Error": ""}
    annotations = binder.calls[-1][4]
    assert 0 < float(annotations[RESERVED_MIB]) < 40960
    assert "family and GPU type not in training data" in annotations[SIZING]  # wider pad

    capsys.readouterr()
    assert models.main(["list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == "tinynet"
    assert models.main(["remove", "tinynet"]) == 0
    time.sleep(1.1)  # a replica checks the registry's revision at most once a second
    assert "unknown model" in _filter(first, make_pod(model="tinynet"))[
        "FailedAndUnresolvableNodes"]["a100"]

    assert models.main(["load", str(env / "out" / "tinynet.json")]) == 0  # from version control
    assert _filter(first, make_pod(model="tinynet"))["Nodes"]["items"]

    tables = _tables_used(monkeypatch)
    third, _ = _replica(redis_url)  # started after the registration: follows it when built
    assert len(tables) == 1 and "tinynet" in tables[0].models
    assert _filter(third, make_pod(model="tinynet"))["Nodes"]["items"] and len(tables) == 1


def test_a_replica_with_nothing_registered_keeps_its_warmed_table(redis_url, monkeypatch) -> None:
    """No registration: neither building a replica nor its first requests re-predict the
    built-in models (a reload would: about 0.2 s on a request)."""
    tables = _tables_used(monkeypatch)
    client, _ = _replica(redis_url)
    time.sleep(1.1)  # past the registry's check interval
    for batch in (16, 32):
        assert _filter(client, make_pod(model="resnet50", batch=batch))["Nodes"]["items"]
    assert tables == []


def _tables_used(monkeypatch) -> list:
    """Every feature table an estimator is switched to (`Estimator.use_table`), in order."""
    tables: list = []
    real = Estimator.use_table
    monkeypatch.setattr(Estimator, "use_table",
                        lambda self, table: tables.append(table) or real(self, table))
    return tables


def test_a_batch_not_computed_is_interpolated_between_the_computed_ones(env,
                                                                         redis_url) -> None:
    assert models.main(["add", "tinynet", "--entry-point", "tinynet:build", "--path",
                        str(env / "src"), "--input", "image:3x64x64", "--no-export"]) == 0
    sizer = Sizer(Estimator.load())
    assert ModelRegistry(RedisStore.from_url(redis_url), sizer).covers("tinynet")

    table = sizer.estimator.table

    def simulated(batch: int) -> float:
        return table.job_features("tinynet", "train", batch).sim_device_mb

    assert simulated(8) < simulated(12) < simulated(16)  # between the computed 8 and 16
    assert simulated(100) > simulated(64)  # beyond the largest: extrapolated from 32 and 64
    predicted = [sizer.estimator.estimate(Job("tinynet", "train", b), gpus=["A100-40GB"])[
        "A100-40GB"].predicted_mib for b in range(1, 129)]
    assert all(a <= b for a, b in zip(predicted, predicted[1:]))  # never less for more


@pytest.mark.parametrize("argv, words", [
    (["add", "resnet50", "--torchvision", "resnet50"], "built-in model"),
    (["add", "bad name", "--torchvision", "resnet18"], "is invalid"),
    (["add", "x", "--torchvision", "no_such_arch"], "not a torchvision architecture"),
    (["add", "x", "--entry-point", "tinynet"], "expected package.module:factory"),
    (["add", "x", "--entry-point", "nowhere:build"], "No module named 'nowhere'"),
    (["add", "x", "--entry-point", "tinynet:not_a_model"], "not an nn.Module"),
    (["add", "x", "--entry-point", "tinynet:build", "--input", "image:3xtall"], "image:CxHxW"),
    (["show", "nothing"], "is not registered"),
    (["remove", "nothing"], "is not registered"),
])
def test_bad_registrations_say_what_to_fix_and_register_nothing(env, argv, words,
                                                                capsys) -> None:
    if argv[0] == "add" and "--entry-point" in argv:
        argv = [*argv, "--path", str(env / "src"), "--no-export"]
    assert models.main(argv) != 0
    assert words in capsys.readouterr().err
    assert models.main(["list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
