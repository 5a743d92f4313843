#!/bin/sh
# The sentinel container: watches the master named "schedtune" with the two other pods'
# sentinels (quorum 2: one pod lost still fails over, a lone pod never does). Hostnames
# throughout (pod IPs change on restart). The configuration is written anew at each
# start; the sentinel learns the replicas and its peers again within seconds.
set -eu
DATA_DIR="${DATA_DIR:-/data}"
. "$(dirname "$0")/find-master.sh"
cat > "${DATA_DIR}/sentinel.conf" <<CONF
port 26379
dir ${DATA_DIR}
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip ${SELF}
requirepass "${REDIS_PASSWORD}"
sentinel sentinel-pass "${REDIS_PASSWORD}"
sentinel monitor schedtune ${MASTER} 6379 2
sentinel auth-pass schedtune "${REDIS_PASSWORD}"
sentinel down-after-milliseconds schedtune 5000
sentinel failover-timeout schedtune 60000
sentinel parallel-syncs schedtune 1
CONF
exec redis-server "${DATA_DIR}/sentinel.conf" --sentinel "$@"
