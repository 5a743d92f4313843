"""Per-node answers over thousands of nodes, kept as arrays and read as mappings.

Filter and prioritize decide over arrays (`extender.core.gpu_table`); building a
dict of thousands of entries per request, then walking it again to encode the
answer, would cost more than the decision. `NodeVerdicts` and `NodeScores` keep
the arrays (request order) and are read as `Mapping[str, ...]` like the dicts
the node-by-node path returns; the encoders take their arrays directly
(`passing_names`, `refused_items`, `score_array`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import compress
from operator import attrgetter, not_
from typing import Any, Generic, TypeVar

import numpy as np

from extender.model import Verdict

V = TypeVar("V")
_FITS = attrgetter("fits")


class _ByNode(Mapping[str, V], Generic[V]):
    """`array[i]` is the answer for `names[i]` (names distinct, request order)."""

    def __init__(self, names: Sequence[str], values: np.ndarray,
                 positions: Mapping[str, int] | None = None) -> None:
        self.names = names
        self.array = values
        self._positions = positions

    @property
    def positions(self) -> Mapping[str, int]:
        """Name -> index into `array`."""
        if self._positions is None:
            self._positions = {n: i for i, n in enumerate(self.names)}
        return self._positions

    def __getitem__(self, name: str) -> V:
        value = self.array[self.positions[name]]
        return value.item() if isinstance(value, np.generic) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def values(self) -> Any:  # a list: one pass in C, not a lookup per name
        return self.array.tolist()

    def items(self) -> Any:
        return list(zip(self.names, self.array.tolist(), strict=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.items())!r})"


class NodeVerdicts(_ByNode[Verdict]):
    """Verdicts per node (an object array), with `fits` (a bool per node) and the names
    that fit (`passing`, in order) beside them."""

    def __init__(self, names: Sequence[str], verdicts: np.ndarray, fits: np.ndarray,
                 passing: list[str], positions: Mapping[str, int] | None = None) -> None:
        super().__init__(names, verdicts, positions)
        self.fits = fits
        self.passing = passing


def object_array(values: list[Any]) -> np.ndarray:
    """`values` as a numpy object array (numpy would unpack tuples, such as `Verdict`s)."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def refuse_passing(verdicts: Mapping[str, Verdict], reason: str) -> Mapping[str, Verdict]:
    """`verdicts` with every passing node refused for `reason` (as arrays, if they are)."""
    refusal = Verdict(False, reason)
    if isinstance(verdicts, NodeVerdicts):
        array = verdicts.array.copy()
        array[verdicts.fits] = object_array([refusal])
        return NodeVerdicts(verdicts.names, array, np.zeros_like(verdicts.fits), [],
                            verdicts.positions)
    return {name: refusal if verdict.fits else verdict for name, verdict in verdicts.items()}


class NodeScores(_ByNode[float]):
    """Scores per node, a float array."""


def passing_names(verdicts: Mapping[str, Verdict]) -> list[str]:
    """The nodes whose verdict fits, in order."""
    if isinstance(verdicts, NodeVerdicts):
        return list(verdicts.passing)
    return list(compress(verdicts, map(_FITS, verdicts.values())))


def refused_items(verdicts: Mapping[str, Verdict]) -> list[tuple[str, Verdict]]:
    """(node, verdict) of the nodes whose verdict does not fit, in order."""
    if isinstance(verdicts, NodeVerdicts):
        names, array = verdicts.names, verdicts.array
        return [(names[i], array[i]) for i in np.flatnonzero(~verdicts.fits).tolist()]
    return list(compress(verdicts.items(), map(not_, map(_FITS, verdicts.values()))))


def score_array(scores: Mapping[str, float]) -> np.ndarray:
    """The scores as a float array in the mapping's order."""
    if isinstance(scores, NodeScores):
        return np.asarray(scores.array, dtype=float)
    return np.fromiter(scores.values(), dtype=float, count=len(scores))
