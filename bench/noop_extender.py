"""A no-op kube-scheduler extender (the benchmark's floor): parses the body, passes every
node, scores 0, binds nothing. Served by gunicorn exactly like ours:
'bench.noop_extender:create_app()'."""

from __future__ import annotations

import orjson
from flask import Flask, Response, request


def create_app() -> Flask:
    app = Flask(__name__)

    @app.post("/filter")
    def filter_nodes() -> Response:
        body = orjson.loads(request.get_data())
        out = {"Nodes": body.get("Nodes"), "NodeNames": body.get("NodeNames"),
               "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
        return Response(orjson.dumps(out), mimetype="application/json")

    @app.post("/prioritize")
    def prioritize() -> Response:
        body = orjson.loads(request.get_data())
        names = body.get("NodeNames") or [n["metadata"]["name"] for n in body["Nodes"]["items"]]
        return Response(orjson.dumps([{"Host": n, "Score": 0} for n in names]),
                        mimetype="application/json")

    @app.post("/bind")
    def bind() -> Response:
        orjson.loads(request.get_data())
        return Response(orjson.dumps({"Error": ""}), mimetype="application/json")

    return app
