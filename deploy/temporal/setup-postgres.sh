#!/bin/sh
# One-shot job `temporal-schema` (docker-compose.yml), in the temporalio/admin-tools image: create Temporal's two
# PostgreSQL databases and bring their schemas to the version this image ships.
#
# Idempotent, so it runs on every `docker compose up` and after an image upgrade:
#   - `create` ignores a database that exists;
#   - `setup-schema -v 0.0` does nothing once a schema version is recorded;
#   - `update-schema` applies only the versioned changes not yet applied.
# A server upgrade is therefore: bump admin-tools and server together, `docker compose up -d`.
set -eu

PLUGIN="${DB:-postgres12}"
HOST="${POSTGRES_SEEDS:-postgresql}"
PORT="${DB_PORT:-5432}"
USER_NAME="${POSTGRES_USER:-temporal}"
# temporal-sql-tool reads the password from SQL_PASSWORD.
SQL_PASSWORD="${SQL_PASSWORD:-${POSTGRES_PWD:-}}"
export SQL_PASSWORD
SCHEMA_DIR="${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}"
WAIT_SECONDS="${WAIT_SECONDS:-120}"

log() { echo "temporal-schema: $*"; }
sqltool() { temporal-sql-tool --plugin "$PLUGIN" --ep "$HOST" -u "$USER_NAME" -p "$PORT" "$@"; }

# PostgreSQL reports healthy before it accepts every connection; retry the first statement for a while.
start=$(date +%s)
until sqltool --db "${DBNAME:-temporal}" create; do
  if [ $(( $(date +%s) - start )) -ge "$WAIT_SECONDS" ]; then
    log "PostgreSQL at $HOST:$PORT still refuses after ${WAIT_SECONDS}s; giving up"
    exit 1
  fi
  log "PostgreSQL at $HOST:$PORT not ready; retrying"
  sleep 2
done

setup_db() { # database, schema subdirectory
  log "database $1: schema $2"
  sqltool --db "$1" create
  sqltool --db "$1" setup-schema -v 0.0
  sqltool --db "$1" update-schema -d "$SCHEMA_DIR/$2/versioned"
}

setup_db "${DBNAME:-temporal}" temporal
setup_db "${VISIBILITY_DBNAME:-temporal_visibility}" visibility
log "done"
