"""Scoring policies by name (`EXTENDER_SCORING`): one module each, one line here."""

from __future__ import annotations

from extender.policies.base import ScoringPolicy
from extender.policies.drain import Drain
from extender.policies.idle_first import IdleFirst
from extender.policies.keeping_up import KeepingUp
from extender.policies.marginal import Marginal
from extender.policies.paper import Paper
from extender.policies.settled import Settled
from extender.policies.shared import Shared

POLICIES: dict[str, type[ScoringPolicy]] = {
    Marginal.name: Marginal,
    Shared.name: Shared,
    Paper.name: Paper,
    Drain.name: Drain,
    Settled.name: Settled,
    IdleFirst.name: IdleFirst,
    KeepingUp.name: KeepingUp,
}
DEFAULT_POLICY = KeepingUp.name


def make_policy(name: str, alpha: float) -> ScoringPolicy:
    """The registered policy `name` (KeyError names the registered ones)."""
    try:
        return POLICIES[name](alpha=alpha)
    except KeyError:
        raise KeyError(f"no scoring policy {name!r}; registered: {', '.join(POLICIES)}") from None
