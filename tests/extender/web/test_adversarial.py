"""Property-based: any body, any verb, both contracts: a 4xx or a contract-valid answer,
never a 500, and a refused request leaves Redis exactly as it was."""

from __future__ import annotations

import hashlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import bind_args, filter_args, make_node, make_pod, volcano_node, volcano_task

KUBE_VERBS = ("/filter", "/prioritize", "/bind")
VOLCANO_VERBS = ("/volcano/predicate", "/volcano/prioritize", "/volcano/allocate",
                 "/volcano/deallocate")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**15), 10**15),
                    st.floats(allow_nan=False), st.text(max_size=40))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20)
annotation_values = st.one_of(
    st.sampled_from(["0", "-1", "1000000000000", "32", "1e3", " 8 ", "", "train", "inference",
                     "resnet50", "vgg16", "nope", "bert_base", "\u00e9\u00e8", "\x00",
                     "0" * 5000 + "32", "9" * 40, "llama-3.1-8b", "a:b", "x" * 300]),
    st.text(max_size=20), st.integers(), st.none(), st.lists(st.integers(), max_size=2),
    st.recursive(st.integers(), st.lists, max_leaves=3))
annotations = st.dictionaries(
    st.sampled_from(["schedtune.io/model", "schedtune.io/task", "schedtune.io/batch-size",
                     "schedtune.io/epochs", "schedtune.io/requests", "other"]),
    annotation_values, max_size=5)
labels = st.dictionaries(
    st.sampled_from(["nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory",
                     "nvidia.com/gpu.replicas"]),
    st.one_of(st.sampled_from(["NVIDIA-GeForce-RTX-3090", "Tesla-T4", "NVIDIA-A100-SXM4-40GB",
                               "0", "-4", "99999999999", "8", "abc", ""]), st.integers(),
              st.none()), max_size=4)


def _mutate(base: dict, data: st.DataObject) -> object:
    """A valid body with keys dropped, replaced by junk, or extra keys added."""
    body = dict(base)
    for key in list(body):
        choice = data.draw(st.integers(0, 3))
        if choice == 1:
            del body[key]
        elif choice == 2:
            body[key] = data.draw(json_values)
    if data.draw(st.booleans()):
        body[data.draw(st.text(max_size=10))] = data.draw(json_values)
    return data.draw(st.one_of(st.just(body), json_values))


def redis_state(redis_client) -> str:  # noqa: ANN001
    """A digest of every key and value: equal digests, unchanged Redis."""
    digest = hashlib.sha256()
    for key in sorted(redis_client.keys("*")):
        digest.update(key.encode())
        digest.update(redis_client.dump(key) or b"")
    return digest.hexdigest()


def _bodies(data: st.DataObject) -> tuple[str, object]:
    pod = make_pod(uid=data.draw(st.sampled_from(["u1", "u2", "x" * 300, "", "a:b", "U-1"])),
                   name=data.draw(st.sampled_from(["job", "Job", "job.", "j" * 254])),
                   namespace=data.draw(st.sampled_from(["default", "team-a", "Team", "n" * 64])))
    pod["metadata"]["annotations"] = data.draw(annotations)
    node = make_node("n1")
    node["metadata"]["labels"] = data.draw(labels)
    verb = data.draw(st.sampled_from(KUBE_VERBS + VOLCANO_VERBS))
    base = {
        "/filter": filter_args(pod, [node], names_only=data.draw(st.booleans())),
        "/prioritize": filter_args(pod, [node]),
        "/bind": bind_args(pod, "n1"),
        "/volcano/predicate": {"task": volcano_task(pod), "node": volcano_node(node)},
        "/volcano/prioritize": {"task": volcano_task(pod), "nodes": [volcano_node(node)]},
        "/volcano/allocate": {"task": volcano_task(pod, "n1"), "node": volcano_node(node)},
        "/volcano/deallocate": {"task": volcano_task(pod, "n1"), "node": volcano_node(node)},
    }[verb]
    return verb, (base if data.draw(st.booleans()) else _mutate(base, data))


def _contract_valid(verb: str, status: int, body: object) -> bool:
    if 400 <= status < 500:
        return True
    if status != 200:
        return verb in ("/prioritize",) and status == 503 or verb.startswith("/volcano/") and status == 503
    if verb == "/filter":
        return isinstance(body, dict) and {"FailedNodes", "Error"} <= set(body)
    if verb == "/prioritize":
        return isinstance(body, list) and all({"Host", "Score"} == set(h) for h in body)
    if verb == "/bind":
        return isinstance(body, dict) and set(body) == {"Error"}
    if verb == "/volcano/predicate":
        return isinstance(body, dict) and {"status", "code"} <= set(body)
    if verb == "/volcano/prioritize":
        return isinstance(body, dict) and "nodeScore" in body
    return isinstance(body, dict)


def _refused(status: int, body: object) -> bool:
    if status != 200:
        return True
    if isinstance(body, dict):
        return bool(body.get("Error") or body.get("errorMessage") or body.get("error"))
    return False


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_body_gets_a_contract_answer_and_refusals_change_nothing(client, redis_client,
                                                                     data) -> None:
    verb, body = _bodies(data)
    redis_client.flushdb()
    before = redis_state(redis_client)
    response = client.post(verb, json=body)
    assert response.status_code != 500, (verb, body, response.data[:300])
    payload = response.get_json(silent=True)
    assert _contract_valid(verb, response.status_code, payload), (verb, response.status_code, payload)
    if _refused(response.status_code, payload):
        assert redis_state(redis_client) == before, (verb, body, payload)


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)),
       verb=st.sampled_from(KUBE_VERBS + VOLCANO_VERBS))
def test_raw_bytes_are_a_4xx(client, redis_client, raw, verb) -> None:
    redis_client.flushdb()
    response = client.post(verb, data=raw, content_type="application/json")
    assert response.status_code != 500
    assert redis_client.dbsize() == 0 or 200 <= response.status_code < 300


def test_deeply_nested_and_huge_bodies(client, redis_client) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert client.post("/filter", data=deep, content_type="application/json").status_code == 400
    huge = b'{"Pod": "' + b"x" * (33 * 1024 * 1024) + b'"}'
    assert client.post("/filter", data=huge, content_type="application/json").status_code == 413
    assert redis_client.dbsize() == 0


def test_logs_never_carry_pod_specs_env_or_tokens(client, caplog) -> None:
    secret = "s3cr3t-token-value"
    pod = make_pod(model="nope")
    pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": secret}]
    pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = secret
    with caplog.at_level("DEBUG"):
        client.post("/filter", json=filter_args(pod, [make_node("n1")]))
        client.post("/filter", json={"Pod": pod, "Nodes": 5})
        client.post("/bind", json={**bind_args(pod, "n1"), "Extra": secret})
        client.post("/volcano/predicate", json={"task": {"Pod": pod}, "node": secret})
    text = "\n".join(r.getMessage() + str(vars(r)) for r in caplog.records)
    assert caplog.records and secret not in text
