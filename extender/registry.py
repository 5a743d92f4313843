"""Every replica follows the models users register (`schedtune models add`), live.

Entries live in Redis (`RedisStore.publish_model`). A replica checks the
registry's revision at most once per `check_every_s` on requests, and at once
when a pod names a model it does not know, so a model registered a moment ago is
estimated by every replica on its next request, without a restart. An entry
that does not read back (`estimator.registered.from_json`) is skipped and logged,
never trusted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from estimator.errors import EstimatorError
from estimator.llm import TransformerConfig
from estimator.registered import RegisteredModel, with_registered
from extender.sizing import Sizer
from extender.state.store import NONE_REGISTERED, RedisStore

log = logging.getLogger(__name__)


class ModelRegistry:
    def __init__(self, store: RedisStore, sizer: Sizer, check_every_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.sizer = sizer
        self.estimator = sizer.estimator
        self.check_every_s = check_every_s
        self.clock = clock
        self.models: dict[str, RegisteredModel] = {}
        self._base = self.estimator.table  # the built-in models' features
        self._known = frozenset(self._base.models) | frozenset(sizer.transformers)
        self._rev = NONE_REGISTERED  # the built-in table, as loaded: nothing to reload
        self._checked_at = -float("inf")

    def sync(self) -> None:
        """Follow the registry if it changed (at most one check per `check_every_s`)."""
        now = self.clock()
        if now - self._checked_at < self.check_every_s:
            return
        self._checked_at = now
        if self.store.models_rev() != self._rev:
            self._reload()

    def covers(self, name: str) -> bool:
        """Whether `name` can be estimated (built in, shipped or registered), following the
        registry first: a change within `check_every_s`, or at once for a name not known
        here (a model registered since the last check)."""
        self.sync()
        if name in self._known:
            return True
        if self.store.registered_model(name) is not None:
            self._reload()
        return name in self.models

    def _reload(self) -> None:
        rev, entries = self.store.registered_models()
        models, transformers = {}, dict(self.sizer.shipped)
        for name, raw in entries.items():
            try:
                model = RegisteredModel.from_json(raw)
                if model.config is not None:
                    config = TransformerConfig.from_mapping(model.config)
            except EstimatorError as exc:
                log.warning("registered model skipped: %s", exc, extra={"model": name[:63]})
                continue
            if model.name != name or name in self._base.models or name in self.sizer.shipped:
                log.warning("registered model skipped: its name is not its key or is a "
                            "built-in model's", extra={"model": name[:63]})
                continue
            models[name] = model
            if model.config is not None:
                transformers[name] = config
        self.models, self._rev = models, rev
        self.estimator.use_table(with_registered(self._base, models.values()))
        self.sizer.transformers = transformers
        self._known = frozenset(self.estimator.models) | frozenset(transformers)
        self._checked_at = self.clock()
