#!/bin/sh
# One-shot job `temporal-setup` (docker-compose.yml), in the temporalio/admin-tools image: once the server answers,
# make sure infir2's namespace exists and holds infir2's custom search attributes.
#
# INFIR2_SEARCH_ATTRIBUTES lists them as `Name=Type` pairs separated by spaces. It must equal
# SEARCH_ATTRIBUTE_FLAGS in src/temporal/constants.ts (what `infir2 up` registers on the dev server);
# test/unit/deploy/compose.test.ts fails when the two differ.
#
# Idempotent: an attribute already registered with the same type is left alone; one registered with another type
# stops the job (Temporal cannot change a type in place). With SQL visibility the attributes belong to the
# namespace, so workers and the CLI must use the same TEMPORAL_NAMESPACE.
set -eu

ADDRESS="${TEMPORAL_ADDRESS:-temporal:7233}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
RETENTION="${TEMPORAL_NAMESPACE_RETENTION:-30d}"
ATTRIBUTES="${INFIR2_SEARCH_ATTRIBUTES:?set INFIR2_SEARCH_ATTRIBUTES to Name=Type pairs}"
WAIT_SECONDS="${WAIT_SECONDS:-180}"
POLL_SECONDS="${POLL_SECONDS:-2}"

log() { echo "temporal-setup: $*"; }
die() { echo "temporal-setup: error: $*" >&2; exit 1; }
tcli() { temporal --address "$ADDRESS" "$@"; }
lower() { echo "$1" | tr '[:upper:]' '[:lower:]'; }

# retry SECONDS WHAT COMMAND...: run COMMAND until it succeeds, at most SECONDS; on giving up, show its last output.
retry() {
  limit=$1; what=$2; shift 2
  start=$(date +%s)
  until out=$("$@" 2>&1); do
    [ $(( $(date +%s) - start )) -lt "$limit" ] || die "gave up after ${limit}s waiting for: $what${out:+ (last: $(echo "$out" | tail -n 1))}"
    sleep "$POLL_SECONDS"
  done
}

# The registered type of a search attribute on the namespace, empty when it has none. The CLI prints a
# `Name  Type` table.
registered_type() {
  tcli operator search-attribute list -n "$NAMESPACE" | awk -v n="$1" '$1 == n { print $2; exit }'
}
has_attribute() { [ "$(lower "$(registered_type "$1")")" = "$(lower "$2")" ]; }

retry "$WAIT_SECONDS" "the Temporal server at $ADDRESS" tcli operator cluster health

if tcli operator namespace describe -n "$NAMESPACE" >/dev/null 2>&1; then
  log "namespace $NAMESPACE exists"
else
  log "creating namespace $NAMESPACE (retention $RETENTION)"
  tcli operator namespace create -n "$NAMESPACE" --retention "$RETENTION"
fi
# `describe` reads the database; the search-attribute calls go through the frontend's namespace cache, which
# learns of a new namespace a little later.
retry 60 "namespace $NAMESPACE" tcli operator namespace describe -n "$NAMESPACE"
retry 60 "the search attributes of namespace $NAMESPACE" tcli operator search-attribute list -n "$NAMESPACE"

query=""
for pair in $ATTRIBUTES; do
  name=${pair%%=*}
  type=${pair#*=}
  [ -n "$name" ] && [ -n "$type" ] && [ "$name" != "$pair" ] || die "bad entry '$pair' in INFIR2_SEARCH_ATTRIBUTES (expected Name=Type)"
  current=$(registered_type "$name")
  if [ -z "$current" ]; then
    log "registering $name ($type)"
    tcli operator search-attribute create -n "$NAMESPACE" --name "$name" --type "$type"
  elif [ "$(lower "$current")" = "$(lower "$type")" ]; then
    log "$name ($type) already registered"
  else
    die "$name is registered as $current on namespace $NAMESPACE, infir2 needs $type; remove it first (temporal operator search-attribute remove --name $name)"
  fi
  # Backquoted: the visibility query parser takes some names for SQL keywords (`Precision` among them).
  query="${query:+$query AND }\`$name\` = 'infir2-setup-probe'"
done

# Registration reaches the frontends' caches a little later; wait until a visibility query that names every
# attribute is accepted, so that `infir2 run` right after `docker compose up` does not fail on them.
for pair in $ATTRIBUTES; do
  retry 60 "search attribute ${pair%%=*}" has_attribute "${pair%%=*}" "${pair#*=}"
done
retry 60 "a visibility query on $query" tcli workflow list -n "$NAMESPACE" --query "$query" --limit 1
log "namespace $NAMESPACE is ready: $ATTRIBUTES"
