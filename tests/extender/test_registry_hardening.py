"""The model registry under entries nobody should have written and under churn (issue #50):
one reader for every entry, an unusable one skipped and reported (never fatal, never a
reload per request), reloads that cost what changed, and an identity a wipe cannot
repeat. Real Redis, real estimator; entries are built from a built-in model's rows (no
torch), or written raw as a hostile or older writer would."""

from __future__ import annotations

import orjson
import pytest

from estimator.feature_table import FeatureTable
from chaos.registry import entry_like
from estimator.predict import Estimator
from estimator.user_models.entry import RegisteredModel, RegistryError, read_entries
from extender.settings import Settings
from extender.web.app import create_app
from tests.builders import bind_args, filter_args, make_node, make_pod
from tests.extender.conftest import FakeClock, RecordingBinder

NODE = make_node("a100", "NVIDIA-A100-SXM4-40GB", count=2, memory_mib=40960, replicas=4)
TABLE = FeatureTable.load()


def _raw(entry: RegisteredModel, **changes) -> bytes:
    data = orjson.loads(entry.to_json())
    data.update(changes)
    return orjson.dumps(data)


def _replica(redis_url: str):
    settings = Settings(redis_url=redis_url, bind_mode="record", node_watch=False,
                        log_level="WARNING")
    binder = RecordingBinder()
    app = create_app(settings, binder=binder, clock=FakeClock(), estimator=Estimator.load())
    return app, app.test_client(), binder


def _filter(client, model: str) -> dict:
    return client.post("/filter", json=filter_args(make_pod(model=model, batch=32),
                                                   [NODE])).get_json()


def _refusal(answer: dict) -> str:
    """Why every node failed (a refused pod fails each node with its reason)."""
    return " ".join([answer["Error"], *(answer.get("FailedNodes") or {}).values(),
                     *(answer.get("FailedAndUnresolvableNodes") or {}).values()])


@pytest.mark.parametrize("batch", ["²", "①", "٣", "1" * 40, "-1", "0"])
def test_a_batch_key_that_is_not_ascii_digits_is_refused_by_the_reader(batch) -> None:
    sims = {"train": {batch: next(iter(entry_like("resnet50", "x").sims["train"].values()))}}
    raw = _raw(entry_like("resnet50", "x"), sims=sims)
    with pytest.raises(RegistryError, match="batch"):
        RegisteredModel.from_json(raw)


@pytest.mark.parametrize("raw", [
    b'{"name": "x", "family": "f", "kind": "torchvision", "source": "s", "summary": {}, '
    b'"sims": {"train": {"1": []}}}',
    b'{"name": "x", "family": "f", "kind": "transformer", "source": "s", "config": [1]}',
    b'[]', b'"text"', b'', b'\xff\xfe', b'{"name": 1}', b'{"name": "x", "family": "f", '
    b'"kind": "transformer", "source": "s", "config": {"hidden_size": 1e400}}',
])
def test_the_reader_answers_a_model_or_its_own_error_whatever_the_bytes(raw) -> None:
    with pytest.raises(RegistryError):
        RegisteredModel.from_json(raw)


def test_read_entries_skips_what_cannot_be_used_and_says_why() -> None:
    good = entry_like("resnet50", "mynet")
    models, unusable = read_entries({
        "mynet": good.to_json(), "moved": good.to_json(),
        "resnet50": entry_like("resnet50", "resnet50").to_json(), "bad": b"{}",
    }, reserved={"resnet50"})
    assert list(models) == ["mynet"]
    assert "named 'mynet'" in unusable["moved"] and "built-in" in unusable["resnet50"]
    assert "bad" in unusable


def test_an_unreadable_entry_stops_no_replica_and_is_reported(redis_url, store) -> None:
    good = entry_like("resnet50", "mynet")
    store.models.publish("poison", _raw(entry_like("resnet50", "poison"), sims={
        "train": {"²": next(iter(good.sims["train"].values()))}}))
    store.models.publish("mynet", good.to_json())
    app, client, _ = _replica(redis_url)  # a replica started with the entry in Redis
    assert not _filter(client, "resnet50")["Error"]  # built-in models are unaffected
    assert _filter(client, "mynet")["Nodes"]["items"]
    assert "poison" in _refusal(_filter(client, "poison"))  # refused as unknown
    ready = client.get("/readyz")
    assert ready.status_code == 200
    registry = ready.get_json()["registry"]
    assert registry["registered"] == 1 and registry["unusable"] == 1
    assert "batch" in registry["skipped"]["poison"]


def test_a_stale_entry_costs_no_reload_per_request(redis_url, store, monkeypatch) -> None:
    store.models.publish("moved", entry_like("resnet50", "elsewhere").to_json())
    _, client, _ = _replica(redis_url)
    reloads = []
    real = Estimator.use_table
    monkeypatch.setattr(Estimator, "use_table",
                        lambda self, table: reloads.append(table) or real(self, table))
    for _ in range(5):
        assert "moved" in _refusal(_filter(client, "moved"))
    assert reloads == []  # the revision it skipped the entry at has not changed
    store.models.publish("other", entry_like("vgg16", "other").to_json())
    assert _filter(client, "other")["Nodes"]["items"]
    assert len(reloads) == 1


def test_a_reload_predicts_only_the_models_that_changed(redis_url, store) -> None:
    for i in range(3):
        store.models.publish(f"net{i}", entry_like("resnet50", f"net{i}").to_json())
    app, client, _ = _replica(redis_url)
    registry = app.extensions["schedtune"].registry
    one_model = sum(map(len, entry_like("resnet50", "net3").sims.values()))
    store.models.publish("net3", entry_like("resnet50", "net3").to_json())
    predicted = []
    real = registry.estimator.use_table
    registry.estimator.use_table = lambda table: predicted.append(real(table)) or predicted[-1]
    assert _filter(client, "net3")["Nodes"]["items"]
    assert predicted == [one_model]  # net0-2 and every built-in model kept their estimates


def test_a_registry_written_again_after_a_wipe_is_followed(redis_url, store,
                                                            redis_client) -> None:
    store.models.publish("mynet", entry_like("resnet50", "mynet").to_json())
    first_rev = store.models.revision()
    app, client, _ = _replica(redis_url)
    small = _filter(client, "mynet")
    redis_client.flushdb()  # Redis lost: its counter restarts
    store.models.publish("mynet", entry_like("mobilenet_v2", "mynet").to_json())
    assert store.models.revision() != first_rev
    assert store.models.revision().endswith(":1") and first_rev.endswith(":1")
    app.extensions["schedtune"].registry.sync(now=True)
    assert app.extensions["schedtune"].registry.models["mynet"].summary == \
        entry_like("mobilenet_v2", "x").summary
    assert _filter(client, "mynet")["Nodes"]["items"] and small["Nodes"]["items"]


@pytest.mark.parametrize("change", ["removed", "now a transformer"])
def test_bind_after_the_model_changed_answers_in_the_contracts_shape(redis_url, store,
                                                                      change) -> None:
    store.models.publish("mynet", entry_like("resnet50", "mynet").to_json())
    app, client, binder = _replica(redis_url)
    registry = app.extensions["schedtune"].registry
    pod = make_pod(model="mynet", batch=32)
    assert client.post("/filter", json=filter_args(pod, [NODE])).get_json()["Nodes"]["items"]
    if change == "removed":
        store.models.remove("mynet")
    else:
        store.models.publish("mynet", orjson.dumps({
            "name": "mynet", "family": "llm", "kind": "transformer", "source": "tests",
            "config": {"hidden_size": 4096, "num_hidden_layers": 32,
                       "num_attention_heads": 32, "vocab_size": 32000,
                       "intermediate_size": 11008}}))
    registry.sync(now=True)  # the next check (at most a second later)
    answer = client.post("/bind", json=bind_args(pod, "a100"))
    assert answer.is_json, answer.data[:200]
    body = answer.get_json()
    assert answer.status_code == 200 and body["Error"] and binder.calls == []
    assert store.job(pod["metadata"]["uid"]) is None


def test_an_entry_with_a_real_models_negative_workspace_reads_back() -> None:
    summary, sims = TABLE.rows_of("resnet50")
    entry = RegisteredModel("myresnet", "resnet", "torchvision", "resnet50",
                            {k: float(v) for k, v in summary.items()
                             if k not in ("model", "family")},
                            {task: dict(rows) for task, rows in sims.items()})
    assert min(row["sim_workspace_mb"] for row in entry.sims["train"].values()) < 0
    assert RegisteredModel.from_json(entry.to_json()) == entry
