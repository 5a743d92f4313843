"""Every replica follows the models users register (`schedtune models add`), live.

Entries live in Redis (`RedisStore.models`: `extender.state.model_store`). A replica
checks the registry's revision at most once per `check_every_s` on requests, and at once
when a pod names a model it does not know, so a model registered a moment ago is
estimated by every replica on its next request, without a restart. An entry
that does not read back (`estimator.user_models.entry.read_entries`) is skipped, logged once
and reported by `/readyz`, never trusted; a reload reads only the entries that changed
and predicts only their models.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from estimator.transformer import TransformerConfig
from estimator.user_models.entry import RegisteredModel, read_entries, with_registered
from extender.metrics import REGISTRY_RELOADS, REGISTRY_UNUSABLE
from extender.sizing import Sizer
from extender.state.model_store import NONE_REGISTERED
from extender.state.store import RedisStore

log = logging.getLogger(__name__)


class ModelRegistry:
    """`models`: the usable registered models; `unusable`: key -> why, for the entries
    this replica skipped at the revision it holds (`/readyz` reports them)."""

    def __init__(self, store: RedisStore, sizer: Sizer, check_every_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.sizer = sizer
        self.estimator = sizer.estimator
        self.check_every_s = check_every_s
        self.clock = clock
        self.models: dict[str, RegisteredModel] = {}
        self.unusable: dict[str, str] = {}
        self._base = self.estimator.table  # the built-in models' features
        self._reserved = frozenset(self._base.models) | frozenset(sizer.shipped)
        self._known = frozenset(self._base.models) | frozenset(sizer.transformers)
        self._read: dict[str, tuple[str, RegisteredModel | None]] = {}  # key -> (entry, model)
        self._rev = NONE_REGISTERED  # the built-in table, as loaded: nothing to reload
        self._checked_at = -float("inf")

    @property
    def revision(self) -> str:
        return self._rev

    def sync(self, now: bool = False) -> None:
        """Follow the registry if it changed (at most one check per `check_every_s`, unless
        `now`)."""
        at = self.clock()
        if not now and at - self._checked_at < self.check_every_s:
            return
        self._checked_at = at
        if self.store.models.revision() != self._rev:
            self._reload()

    def covers(self, name: str) -> bool:
        """Whether `name` can be estimated (built in, shipped or registered), following the
        registry first: a change within `check_every_s`, or at once for a name not known
        here (a model registered since the last check). An entry this replica found
        unusable costs no reload until the registry changes."""
        self.sync()
        if name not in self._known:
            self.sync(now=True)
        return name in self._known

    def _reload(self) -> None:
        rev, entries = self.store.models.entries()
        changed = {k: raw for k, raw in entries.items() if self._read.get(k, ("",))[0] != raw}
        read, unusable = read_entries(changed, self._reserved)
        self._read = {k: v for k, v in self._read.items() if k in entries and k not in changed}
        self._read.update({k: (changed[k], read.get(k)) for k in changed})
        models = {k: m for k, (_, m) in self._read.items() if m is not None}
        transformers = dict(self.sizer.shipped)
        for name, model in list(models.items()):
            if model.config is not None:
                transformers[name] = TransformerConfig.from_mapping(model.config)
        unusable.update({k: why for k, why in self.unusable.items()
                         if k in entries and k not in changed})
        for key, why in unusable.items():
            if key in changed:  # once per entry and revision
                REGISTRY_UNUSABLE.inc()
                log.warning("registered model skipped: %s", why[:300], extra={"model": key[:63]})
        self.models, self.unusable, self._rev = models, unusable, rev
        REGISTRY_RELOADS.inc()
        predicted = self.estimator.use_table(with_registered(self._base, models.values()))
        self.sizer.transformers = transformers
        self._known = frozenset(self.estimator.models) | frozenset(transformers)
        self._checked_at = self.clock()
        log.info("model registry followed", extra={"revision": rev, "models": len(models),
                                                   "unusable": len(unusable),
                                                   "changed": len(changed),
                                                   "predicted": predicted})
