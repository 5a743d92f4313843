"""Full-nodes bodies whose node objects were all seen before: only the pod is parsed.

With ``nodeCacheCapable: false`` kube-scheduler sends every candidate node's whole
object, pod after pod: a body is a new pod in front of node objects it sent
before, in a new order each time (its filters run in parallel and list nodes as
they finish). encoding/json writes the list in one shape,

    {"Pod":{...},"Nodes":{"metadata":{},"items":[{"metadata":...},...]},"NodeNames":null}

so the items split at ``},{"metadata":`` into the bytes of each node object.
`KnownNodeObjects` remembers node objects by those bytes; a body whose every item
is remembered has only its head (the pod) parsed, and its items are the objects
remembered, in the body's order.

The answer is `parse_body(raw)`'s, refusals included. A node object is remembered
only from a body that `parse_body` accepted, when orjson writes the object back as
exactly its bytes there (so those bytes are that object and nothing else, and it
sat at the depth every body puts its items at, within the bound). A body is taken
in parts only when its head closes as a JSON object of at least one member (so the
items list starts at the body's top level, outside any string) and every item is
remembered; its depth is then the deeper of its head's and its items', both within
the bound. Anything else is parsed whole, as before. The objects remembered are
shared by every request that reuses them: nothing may change a parsed body in
place (decoders read, encoders build new objects).
"""

from __future__ import annotations

from typing import Any

import orjson

from extender.errors import BadRequest
from extender.web.http_io import parse_body

NODES_OPEN = b',"Nodes":{"metadata":{},"items":['
NODES_CLOSE = b']},"NodeNames":null}'
ITEM_OPEN = b'{"metadata":'
ITEM_SEPARATOR = b'},{"metadata":'
MAX_REMEMBERED_BYTES = 16 << 20  # ~5,500 node objects (~64 MB parsed); past it, start again


class KnownNodeObjects:
    """Node objects seen in accepted full-nodes bodies, by their bytes there (each object
    is immutable once parsed; the dict is replaced whole when full, never shrunk)."""

    def __init__(self, max_bytes: int = MAX_REMEMBERED_BYTES) -> None:
        self.max_bytes = max_bytes
        self._objects: dict[bytes, Any] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._objects)

    def parse(self, raw: bytes) -> Any:
        """The JSON value of `raw`, as `parse_body` gives it (and refuses it)."""
        split = _split(raw)
        if split is not None:
            head, pieces = split
            objects = self._objects
            items = [objects.get(piece) for piece in pieces]
            if None not in items:
                value = _head_object(head)
                if value is not None:
                    return {**value, "Nodes": {"metadata": {}, "items": items},
                            "NodeNames": None}
        value = parse_body(raw)
        if split is not None:
            self._remember(split[1], value)
        return value

    def _remember(self, pieces: list[bytes], value: Any) -> None:
        nodes = value.get("Nodes") if isinstance(value, dict) else None
        items = nodes.get("items") if isinstance(nodes, dict) else None
        if not isinstance(items, list) or len(items) != len(pieces):
            return
        for piece, item in zip(pieces, items, strict=True):
            if (piece in self._objects or len(piece) > self.max_bytes
                    or orjson.dumps(item) != ITEM_OPEN + piece + b"}"):
                continue
            if self._bytes + len(piece) > self.max_bytes:
                self._objects, self._bytes = {}, 0
            self._objects[piece] = item
            self._bytes += len(piece)


def _split(raw: bytes) -> tuple[bytes, list[bytes]] | None:
    """(the head before the node list, each item's bytes after its `{"metadata":` and before
    its closing `}`) when `raw` ends in encoding/json's node list, else None."""
    start = raw.find(NODES_OPEN)
    end = len(raw) - len(NODES_CLOSE)
    if start <= 0 or start + len(NODES_OPEN) > end or not raw.endswith(NODES_CLOSE):
        return None
    items = raw[start + len(NODES_OPEN):end]
    if not items:
        return raw[:start], []
    if not (items.startswith(ITEM_OPEN) and items.endswith(b"}")):
        return None
    return raw[:start], items[len(ITEM_OPEN):-1].split(ITEM_SEPARATOR)


def _head_object(head: bytes) -> dict[str, Any] | None:
    """`head` closed with `}` as a JSON object of at least one member (depth checked), or
    None when it does not close so."""
    try:
        value = parse_body(head + b"}")
    except BadRequest:
        return None
    return value if isinstance(value, dict) and value else None
