"""Request bodies that end as an earlier one did: the repeated part parsed once.

kube-scheduler marshals `ExtenderArgs` field by field, the pod first, then
``,"Nodes":...,"NodeNames":...}``, and names the same nodes pod after pod (every
node object in full-nodes mode, thousands of names in names mode): a body is a
new pod in front of a tail it sent before. `BodyTails` remembers the last few
tails; a body ending in one has only its head (the pod) parsed and checked.

The answer is `parse_body(raw)`'s, refusals included: a tail is kept only from a
body that passed `parse_body` whole, and only when the bytes before it close as
a JSON object of at least one member (so it starts at the body's top level,
outside any string, after a complete member, and its nesting was counted from
there). A later body ending in it is taken in two parts only when its own head
closes the same way, and its depth is the deeper of its head's and the kept
body's (both within the bound). Members the tail names override the head's, as
JSON's last duplicate wins. Anything else is parsed whole, as before.

A tail's members are parsed the second time it is seen, so bodies that never
repeat (prioritize's, when the nodes that passed differ pod by pod) cost one
search and one small parse each, never a second full parse. The values kept
are shared by every request that reuses them: nothing may change a parsed body
in place (decoders read, encoders build new objects).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from extender.errors import BadRequest
from extender.web.http_io import parse_body

TAIL_START = b',"Nodes":'  # ExtenderArgs' second field, as encoding/json writes it
TAILS_KEPT = 4  # a filter's nodes and the nodes that passed it for a few pod shapes
MAX_TAIL_BYTES = 4 << 20  # ~1,400 full node objects (~16 MB parsed); longer: parsed each time


@dataclass(frozen=True)
class _Tail:
    raw: bytes
    members: dict[str, Any] | None  # None until the tail is seen a second time


class BodyTails:
    """The last `TAILS_KEPT` tails seen, most recently used last (replaced whole, never
    edited, so threads sharing it at worst lose an entry)."""

    def __init__(self, kept: int = TAILS_KEPT, max_tail_bytes: int = MAX_TAIL_BYTES) -> None:
        self.kept = kept
        self.max_tail_bytes = max_tail_bytes
        self._tails: tuple[_Tail, ...] = ()

    def parse(self, raw: bytes) -> Any:
        """The JSON value of `raw`, as `parse_body` gives it (and refuses it)."""
        for tail in reversed(self._tails):
            if len(raw) > len(tail.raw) and raw.endswith(tail.raw):
                head = _head_object(raw[:len(raw) - len(tail.raw)])
                if head is not None:
                    members = tail.members
                    if members is None:
                        members = orjson.loads(b"{" + tail.raw[1:])
                    self._keep(_Tail(tail.raw, members), drop=tail)
                    return {**head, **members}
        value = parse_body(raw)
        if isinstance(value, dict):
            self._remember(raw)
        return value

    def _remember(self, raw: bytes) -> None:
        start = raw.find(TAIL_START)
        if start <= 0 or len(raw) - start > self.max_tail_bytes:
            return
        if _head_object(raw[:start]) is not None:
            self._keep(_Tail(raw[start:], None))

    def _keep(self, tail: _Tail, drop: _Tail | None = None) -> None:
        others = tuple(t for t in self._tails if t is not drop and t.raw != tail.raw)
        self._tails = (*others[max(0, len(others) + 1 - self.kept):], tail)


def _head_object(head: bytes) -> dict[str, Any] | None:
    """`head` closed with `}` as a JSON object of at least one member (depth checked), or
    None when it does not close so."""
    try:
        value = parse_body(head + b"}")
    except BadRequest:
        return None
    return value if isinstance(value, dict) and value else None
