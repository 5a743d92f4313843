"""The chaos harness: hostile, racing and fault scenarios against real processes on
127.0.0.1 (one redis-server, two gunicorn extender replicas), then an audit of Redis and
one report that says what each scenario executed against what was asked.

Modules: `cluster` (the nodes, GPUs and pods the scenarios use), `ledger` (counters,
samples and dead threads, shared by every thread), `answers` (one request and the
outcome of its answer), `processes` (the replicas: start, SIGKILL, stop), `world` (what
every scenario drives), `hostile` (the hostile request catalogue), `fuzz` (sending it),
`attacks` (the stateful attack rounds), `race` (racing filter and bind threads, fault
windows), `faults` (Redis and replica kills, outage probes, slow clients), `audit`
(Redis and gunicorn's logs against the answers), `report` (asked vs executed, the
enforced figures, the JSON), `runner` (one run end to end). `schedtune chaos`
(scripts/chaos.py) is the CLI.
"""
