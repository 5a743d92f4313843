"""chaos/race.py: a racer hit by an unexpected exception dies loudly (no processes)."""

from __future__ import annotations

import time

from chaos.answers import Answer
from chaos.ledger import Ledger
from chaos.race import Race
from chaos.world import World


def test_a_racer_hit_by_an_unexpected_exception_dies_loudly() -> None:
    class Broken(World):
        def call(self, *args: object, **kwargs: object) -> Answer:
            raise KeyError("Nodes")

    # No processes: nothing but `call` is reached before it raises.
    world = Broken(None, None, None, None, Ledger())  # type: ignore[arg-type]
    race = Race(world, binds=10, deadline=time.monotonic() + 10)
    race.faults_done.set()
    world.ledger.run([world.ledger.thread("racer-0", lambda: race.racer(1))])
    assert world.ledger.deaths == ["racer-0: KeyError: 'Nodes'"]
    assert race.binds_answered == 0
