"""Plays recorded LIST bodies and watch streams to the kubernetes client's own `Watch`,
exactly as an API function (`list_pod_for_all_namespaces`) would deliver them."""

from __future__ import annotations

import threading
from typing import Any

import orjson
from urllib3.exceptions import ProtocolError

DROP = {"drop": "connection"}  # put in a stream: the connection breaks at that point


class _Response:
    status = 200

    def __init__(self, data: bytes = b"", events: list[dict[str, Any]] | None = None) -> None:
        self.data = data
        self._events = events or []

    def stream(self, amt: Any = None, decode_content: bool = False):  # noqa: ANN201, ARG002
        for event in self._events:
            if event is DROP:
                raise ProtocolError("Connection broken: IncompleteRead")
            yield orjson.dumps(event) + b"\n"

    def close(self) -> None: ...

    def release_conn(self) -> None: ...


class RecordedApi:
    """`list_fn` for `kube.watch_forever`; sets `stop` once every stream has been served."""

    def __init__(self, listings: list[dict[str, Any]], streams: list[list[dict[str, Any]]],
                 stop: threading.Event) -> None:
        self.listings, self.streams, self.stop = list(listings), list(streams), stop
        self.calls: list[dict[str, Any]] = []

    def list_fn(self, **kwargs: Any) -> _Response:
        self.calls.append(kwargs)
        if kwargs.get("watch"):
            if not self.streams:
                self.stop.set()
                return _Response(events=[])
            return _Response(events=self.streams.pop(0))
        return _Response(data=orjson.dumps(self.listings.pop(0)))
