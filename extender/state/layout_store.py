"""Node GPU layouts in the store (a `RedisStore` mixin): the node watcher's writes, read
by every worker and cached until `st:nodes:rev` moves."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Callable

import orjson
import redis

from extender.model import NodeGpus
from extender.state.keys import NODES_KEY, NODES_REV_KEY
from extender.state.records import layout_from_json


class NodeLayouts:
    """The layouts half of `RedisStore` (its client, error translation, layout cache)."""

    _redis: redis.Redis
    _call: Callable[..., Any]
    _layout_cache: tuple[str | None, dict[str, NodeGpus]]

    def node_names(self) -> list[str]:
        return sorted(self._call(self._redis.hkeys, NODES_KEY))

    def node_layouts(self) -> dict[str, NodeGpus]:
        """Every layout the node watcher recorded (unreadable entries left out)."""
        return dict(self._layouts(None))

    def put_node(self, name: str, layout: NodeGpus | None) -> None:
        """Record (or with None, forget) a node's GPU layout: the node watcher's write."""
        pipe = self._redis.pipeline(transaction=True)
        if layout is None:
            pipe.hdel(NODES_KEY, name)
        else:
            pipe.hset(NODES_KEY, name, orjson.dumps(asdict(layout)))
        pipe.incr(NODES_REV_KEY)
        self._call(pipe.execute)

    def _layouts(self, rev: str | None) -> dict[str, NodeGpus]:
        """Node layouts, re-read only when `st:nodes:rev` moved since the last read."""
        cached_rev, cached = self._layout_cache
        if rev is not None and rev == cached_rev:
            return cached
        pipe = self._redis.pipeline(transaction=True)
        pipe.get(NODES_REV_KEY)
        pipe.hgetall(NODES_KEY)
        new_rev, raw = self._call(pipe.execute)
        layouts = {}
        for name, value in raw.items():
            layout = layout_from_json(value)
            if layout is not None:
                layouts[name] = layout
        self._layout_cache = (new_rev or "0", layouts)
        return layouts
