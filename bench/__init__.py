"""The extender's latency benchmark (`schedtune bench`): a simulated cluster in Redis, ours
and a no-op extender under gunicorn, the same pods through both, and where ours spends its
time in-process."""
