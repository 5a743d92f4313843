#!/bin/sh
# Sourced by start-redis.sh and start-sentinel.sh: sets MASTER to the host of the current
# master. The sentinels of the other pods are asked first (after a failover the master is
# whichever pod they promoted); when none answers (the first start, or all three pods
# restarted together), pod 0 is the master: then pod 0's data wins over the others'.
SERVICE="schedtune-redis-ha.${POD_NAMESPACE}.svc"
SELF="${POD_NAME}.${SERVICE}"
MASTER=""
for i in 0 1 2; do
  peer="schedtune-redis-ha-${i}.${SERVICE}"
  [ "$peer" = "$SELF" ] && continue
  answer="$(REDISCLI_AUTH="$REDIS_PASSWORD" timeout 3 redis-cli -h "$peer" -p 26379 --raw \
    sentinel get-master-addr-by-name schedtune 2>/dev/null | head -n 1)" || answer=""
  case "$answer" in
    ""|*ERR*|*NOAUTH*|*"Could not connect"*) ;;
    *) MASTER="$answer"; break ;;
  esac
done
[ -n "$MASTER" ] || MASTER="schedtune-redis-ha-0.${SERVICE}"
