"""Answers kept as arrays read exactly as the dicts the node-by-node path builds."""

from __future__ import annotations

import random

import numpy as np
import pytest

from extender.by_node import NodeScores, NodeVerdicts, passing_names, refused_items, score_array
from extender.model import Verdict

KINDS = [Verdict(True, gpu_index=0), Verdict(True, gpu_index=2), Verdict(False, "short"),
         Verdict(False, "no GPUs", unresolvable=True)]


def _objects(values: list) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


@pytest.mark.parametrize("weights", [[1, 1, 0, 0], [0, 0, 1, 1], [3, 1, 2, 1]])
def test_verdicts_as_arrays_read_as_their_dict(weights) -> None:
    rng = random.Random(sum(weights))
    names = [f"n{i}" for i in range(500)]
    chosen = rng.choices(KINDS, weights, k=len(names))
    fits = np.array([v.fits for v in chosen])
    arrays = NodeVerdicts(names, _objects(chosen), fits,
                          [n for n, v in zip(names, chosen) if v.fits])
    as_dict = dict(zip(names, chosen))
    assert arrays == as_dict and as_dict == arrays and len(arrays) == len(names)
    assert list(arrays) == names and list(arrays.values()) == chosen
    assert all(arrays[n] is v for n, v in as_dict.items()) and "n7" in arrays
    assert "elsewhere" not in arrays and arrays.get("elsewhere") is None
    assert passing_names(arrays) == passing_names(as_dict)
    assert refused_items(arrays) == refused_items(as_dict)
    assert passing_names(as_dict) == [n for n, v in as_dict.items() if v.fits]
    assert refused_items(as_dict) == [(n, v) for n, v in as_dict.items() if not v.fits]
    changed = dict(as_dict, n0=KINDS[3] if as_dict["n0"].fits else KINDS[0])
    assert arrays != changed


def test_scores_as_arrays_read_as_python_floats() -> None:
    names = ["a", "b", "c"]
    scores = NodeScores(names, np.array([0.25, 1.0, 0.0]))
    assert scores == {"a": 0.25, "b": 1.0, "c": 0.0} and scores != {"a": 0.25, "b": 1.0}
    assert type(scores["a"]) is float and scores.items() == [("a", 0.25), ("b", 1.0), ("c", 0.0)]
    assert score_array(scores).tolist() == score_array(dict(scores.items())).tolist()
    with pytest.raises(KeyError):
        scores["d"]
