"""HAMi's annotations (extender.wire.hami) against its formats (tests/data/hami/README.md)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from extender.wire import hami
from extender.wire.node_labels import gpus_from_hami

DATA = Path(__file__).resolve().parents[2] / "data" / "hami"
A10_ALLOCATABLE = {"nvidia.com/gpu": "40"}


def test_the_json_register_gives_the_healthy_devices_by_index() -> None:
    raw = (DATA / "register-json.txt").read_text().strip()
    devices, refused = hami.decode_register(raw)
    assert [d.index for d in devices] == [0, 1, 2, 3] and not refused
    layout = gpus_from_hami({}, {hami.REGISTER: raw}, A10_ALLOCATABLE)
    assert (layout.product, layout.gpu_type, layout.count, layout.memory_mib) == (
        "NVIDIA-A10", "A10", 3, 23028)
    assert layout.uuids == tuple(d.uuid for d in devices if d.healthy)
    assert layout.share_slots == 10


def test_the_older_delimited_register_decodes_the_same_way() -> None:
    raw = (DATA / "register-delimited.txt").read_text()
    layout = gpus_from_hami({}, {hami.REGISTER: raw}, {"nvidia.com/gpu": "20"})
    assert (layout.product, layout.gpu_type, layout.count, layout.uuids) == (
        "Tesla-T4", "T4", 2, ("GPU-0b7e-t4-0", "GPU-0b7e-t4-1"))


@pytest.mark.parametrize("entry", [
    {"id": "GPU-x", "index": 0, "count": 10, "devmem": -5, "type": "t", "health": True},
    {"id": "GPU-x,evil:", "index": 0, "count": 10, "devmem": 100, "type": "t", "health": True},
    {"id": "GPU-x", "index": 0, "count": 10, "devmem": 1e9, "type": "t", "health": True},
    {"id": "GPU-x", "index": 999, "count": 10, "devmem": 100, "type": "t", "health": True},
    {"id": "GPU-x", "index": 0, "count": 10, "devmem": 100, "type": "t", "health": "yes"},
    "GPU-x",
])
def test_a_forged_device_is_refused_alone(entry) -> None:
    good = {"id": "GPU-ok", "index": 1, "count": 4, "devmem": 8000, "type": "NVIDIA-L4",
            "health": True}
    devices, refused = hami.decode_register(orjson.dumps([entry, good]).decode())
    assert [d.uuid for d in devices] == ["GPU-ok"] and refused == ["device 0 refused"]


@pytest.mark.parametrize("raw", [None, "", "not json [", "[1, 2", '{"id": 1}', "a,b,c:",
                                 '[{"id":"GPU-a","index":0,"count":1,"devmem":10,"type":"",'
                                 '"health":true},{"id":"GPU-a","index":1,"count":1,'
                                 '"devmem":10,"type":"","health":true}]'])
def test_a_register_that_cannot_be_believed_leaves_the_node_without_gpus(raw) -> None:
    layout = gpus_from_hami({}, {hami.REGISTER: raw}, A10_ALLOCATABLE)
    assert layout.count == 0 and layout.problem


def test_withdrawn_devices_or_a_gone_device_plugin_leave_the_node_without_gpus() -> None:
    raw = (DATA / "register-json.txt").read_text().strip()
    gone = gpus_from_hami({}, {hami.REGISTER: raw, hami.HANDSHAKE: "Deleted_2026-12-01"},
                          A10_ALLOCATABLE)
    stopped = gpus_from_hami({}, {hami.REGISTER: raw}, {"nvidia.com/gpu": "0"})
    assert gone.count == stopped.count == 0 and "not serving" in gone.problem


def test_each_container_gets_its_devices_in_order_capped_at_the_reserved_mib() -> None:
    assert hami.container_devices([1], ["GPU-a"], 5423.2) == "GPU-a,NVIDIA,5424,0:;"
    assert hami.container_devices([0, 2, 0], ["GPU-a", "GPU-b"], 100) == (
        ";GPU-a,NVIDIA,100,0:GPU-b,NVIDIA,100,0:;;")


def test_a_node_lock_holds_for_five_minutes() -> None:
    value = hami.lock_value(1_800_000_000.0, "ml", "train-0")
    assert value == "2027-01-15T08:00:00Z,ml,train-0"
    assert hami.lock_holder(value, 1_800_000_000.0 + 299) == ("ml", "train-0")
    assert hami.lock_holder(value, 1_800_000_000.0 + 301) is None
    assert hami.lock_holder("garbage", 0.0) is None


def test_the_device_plugins_answer() -> None:
    notes = hami.bind_annotations("n1", (1,), ["GPU-a"], 100, now=1000.0)
    assert hami.allocation_outcome(notes, 1100.0) == "allocating"
    assert hami.allocation_outcome(notes, 1000.0 + 301) == "unanswered"
    assert hami.allocation_outcome({**notes, hami.BIND_PHASE: "success"}, 9e9) == "success"
    assert hami.allocation_outcome({**notes, hami.BIND_PHASE: "failed"}, 0) == "failed"
    assert hami.allocation_outcome({hami.BIND_PHASE: "failed"}, 0) == ""  # not ours
