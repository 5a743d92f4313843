"""Hostile, racing and fault scenarios against real processes on 127.0.0.1; the JSON says
what each scenario executed, and the run fails when one ran less than asked.

    schedtune chaos --json                 # 10,000 hostile requests, 10,000 racing binds,
                                           # 5 Redis SIGKILLs, 3 replica SIGKILLs
    schedtune chaos --fuzz 300 --binds 400 --redis-kills 2 --replica-kills 1 --json
    schedtune chaos --sentinel --json      # 10 master SIGKILLs under racing binds

Starts one redis-server (AOF, `EmbeddedRedis`) and two extender replicas (gunicorn, two
workers each, record-only binds, a bearer token unless --no-auth) on it, and writes the
nodes' GPU layouts as the node watcher does. Then:

1. hostile: `--fuzz` requests to both replicas. Attack rounds first (a full-nodes filter
   claiming 16 GPUs of 1 TiB for a real node, then binds; a second bind of a bound pod to
   another node; Volcano deallocate of a kube-scheduler bind; allocate for made-up UIDs;
   filter, bind and deallocate without or with a wrong token), then single requests:
   mutated bodies of all seven verbs, JSON nested 60,000 deep, 5,000-digit and
   non-finite annotations and GPU labels, names outside Kubernetes rules (300
   characters, '/', ':', NUL, CR LF), requests without a token.
2. race: 8 threads filter on one replica and bind (twice, as kube-scheduler retries) on
   the other for pods competing for 8 GPUs; half the bound pods are then released (as
   the monitor does), until `--binds` bind requests were answered. Spread over that
   stream, one at a time: `--replica-kills` replicas SIGKILLed (master and workers, as
   when the container dies) and restarted; `--redis-kills` SIGKILLs of Redis, restarted
   from its AOF after `--redis-down-s`; `--slow-clients` sockets that send a request
   line and then one header a second for `--slow-hold-s`.
3. audit: Redis against the answers; gunicorn's logs for replaced workers.

JSON, one document on stdout:
  ok, failures      exit 0 only without failures; each names the #14 area it depends on
  asked, executed   per scenario, the same keys; executed < asked fails the run
  thread_deaths     "<thread>: <exception>: <text>" for every thread that died
  figures           the enforced counts (`EXPECTED`), then what is reported:
                    restart_to_first_good_answer_s {min, median, max} (each restart also
                    held to --restart-budget-s), lost_reservations_after_redis_kill and
                    released_reservations_back_after_redis_kill (see redis_kills)
  requests          every request sent
  hostile           requests by kind and by verb, outcomes by kind
  attacks           rounds per attack; outcomes of their well-formed set-up requests
  race              requests by verb, bind requests per replica, binds answered, held at
                    the end, releases; outcomes and max latency per fault window (none,
                    replica_down, redis_down, slow_clients)
  replica_kills     per kill: the replica, seconds from the restart command to the first
                    200 on /filter with a well-formed body
  redis_kills       per kill: outage_s (SIGKILL to PING after the AOF restart), what Redis
                    held and binds had answered before, held after, lost, released but
                    back, the outage probes, recovery_s (to the first good filter)
  slow_clients      sockets, seconds held, when the server closed them; well-formed
                    requests sent and answered while held, their max latency
  audit, workers    the final audit; replaced workers and why, secrets found in the logs
  samples           up to 5 answers per kind of failure

With --sentinel: the race alone, on 3 redis-servers and 3 sentinels (`chaos/sentinel.py`),
the replicas reaching the master through the sentinels; `--master-kills` SIGKILLs of the
master, one every `--kill-every-s` of racing, each restarted once a replica is promoted.
Its figures: master_kills, failover_s {min, median, max} (SIGKILL until a promoted master
takes writes), binds answered and refused during failovers, acknowledged_lost_after_failover,
binds_passed_through_unreserved (every racing pod is annotated: a bind answered without a
reservation), split_brain_writes (a reservation written straight to the restarted old
master), overcommits, and durability_cost_ms (a reservation and its confirmation with and
without WAIT).

Outcomes (ok, error, refused, unauthorized, retriable, server_error, non_contract, timeout,
connection_error): `chaos/answers.py`. The scenarios, the audit and the report live in the
`chaos` package; this is its CLI.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

# Run as `python scripts/chaos.py`, Python puts scripts/ first on the path, where this
# file would shadow the `chaos` package: the checkout goes before it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos.failover import run_failover_chaos  # noqa: E402
from chaos.runner import run_chaos  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzz", type=int, default=10_000, help="hostile requests")
    parser.add_argument("--binds", type=int, default=10_000, help="racing bind requests answered")
    parser.add_argument("--redis-kills", type=int, default=5)
    parser.add_argument("--redis-down-s", type=float, default=1.0)
    parser.add_argument("--replica-kills", type=int, default=3)
    parser.add_argument("--restart-budget-s", type=float, default=2.0,
                        help="kill -9 to first good answer (issue #14: 2 s)")
    parser.add_argument("--slow-clients", type=int, default=4)
    parser.add_argument("--slow-hold-s", type=float, default=8.0)
    parser.add_argument("--race-timeout-s", type=float, default=1800.0)
    parser.add_argument("--no-auth", action="store_true", help="run the replicas without a token")
    parser.add_argument("--sentinel", action="store_true",
                        help="the race on a Redis Sentinel topology, its master SIGKILLed "
                             "--master-kills times (chaos/failover.py); no other scenario")
    parser.add_argument("--master-kills", type=int, default=10)
    parser.add_argument("--kill-every-s", type=float, default=3.0,
                        help="--sentinel: seconds of racing binds before each master kill")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-failed", type=Path, metavar="DIR",
                        help="--sentinel: a run that fails leaves its servers' and replicas' "
                             "logs and data under DIR")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 0 <= args.fuzz <= 1_000_000 or not 10 <= args.binds <= 1_000_000:
        parser.error("--fuzz 0..1000000, --binds 10..1000000")
    if min(args.redis_kills, args.replica_kills, args.slow_clients, args.master_kills) < 0 \
            or args.slow_hold_s > 60 or not 0 <= args.kill_every_s <= 600:
        parser.error("kill and client counts >= 0, --slow-hold-s <= 60, --kill-every-s 0..600")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="chaos %(message)s")
    result = run_failover_chaos(args) if args.sentinel else run_chaos(args)
    print(json.dumps(result, indent=None if args.json else 2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
