#!/usr/bin/env bash
# Start PostgreSQL and Redis when they are down and create the test database. Idempotent.
set -euo pipefail
PGHOST=${NEURULES_PGHOST:-127.0.0.1}
if ! pg_isready -q -h "$PGHOST" -p 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  for _ in $(seq 1 30); do pg_isready -q -h "$PGHOST" -p 5432 && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
for db in neurules_test; do
  if ! psql -h "$PGHOST" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$db'" | grep -q 1; then
    psql -h "$PGHOST" -U postgres -c "CREATE DATABASE $db" >/dev/null
  fi
done
echo "services: postgres and redis up, database neurules_test present"
