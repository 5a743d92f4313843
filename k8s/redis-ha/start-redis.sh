#!/bin/sh
# The redis container: the settings of k8s/redis.yaml (AOF, a password, 512 MB evicting
# only keys with a TTL), a replica of the current master unless it is the master, and
# min-replicas-to-write 1, so that a master cut off from every replica (the old one come
# back alone, or the minority side of a partition) refuses writes instead of taking ones
# that the failover's winner would overwrite.
set -eu
DATA_DIR="${DATA_DIR:-/data}"
. "$(dirname "$0")/find-master.sh"
cat > "${DATA_DIR}/redis.conf" <<CONF
port 6379
dir ${DATA_DIR}
appendonly yes
appendfsync everysec
save ""
requirepass "${REDIS_PASSWORD}"
masterauth "${REDIS_PASSWORD}"
maxmemory 512mb
maxmemory-policy volatile-ttl
min-replicas-to-write 1
min-replicas-max-lag 10
replica-announce-ip ${SELF}
CONF
if [ "$MASTER" != "$SELF" ]; then
  echo "replicaof ${MASTER} 6379" >> "${DATA_DIR}/redis.conf"
fi
exec redis-server "${DATA_DIR}/redis.conf" "$@"  # arguments override the file
