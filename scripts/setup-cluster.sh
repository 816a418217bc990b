#!/usr/bin/env bash
# Idempotent set-up of the cluster test tier (`make setup-cluster`, test/cluster/): the real control plane of
# docker-compose.yml, without Docker.
#   - the Temporal server (`temporal-server`) and its SQL schema tool (`temporal-sql-tool`) of exactly the release
#     docker-compose.yml pins (`temporalio/server:X.Y.Z`), built from the Go module go.temporal.io/server@vX.Y.Z;
#   - that release's PostgreSQL schema (schema/postgresql/v12, what admin-tools ships in /etc/temporal/schema);
#   - the Web UI server of the release it pins (`temporalio/ui:X.Y.Z`), from github.com/temporalio/ui-server/v2@vX.Y.Z;
#   - Debian's PostgreSQL server (initdb, pg_ctl), and Debian's Slurm and munge (the tier's own small cluster).
# Everything lands in ${INFIR2_CACHE:-$HOME/.cache/infir2}, outside the repository: the first run downloads about
# 1.5 GB of Go modules and compiles for minutes; a second run finds the stamp and takes a second.
# The tier's harness (test/cluster/harness.ts) reads what it needs from the manifest written at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { printf '[setup-cluster] %s\n' "$*"; }
die() { printf '[setup-cluster] error: %s\n' "$*" >&2; exit 1; }
t0=$(date +%s)

# 1. The release: docker-compose.yml is the one place it is written.
version=$(sed -n 's#^[[:space:]]*image:[[:space:]]*temporalio/server:\([0-9][0-9.]*\)[[:space:]]*$#\1#p' docker-compose.yml | head -n 1)
[ -n "$version" ] || die "no 'image: temporalio/server:X.Y.Z' line in docker-compose.yml"
cache=${INFIR2_CACHE:-$HOME/.cache/infir2}
dir="$cache/temporal-server-$version"
bin="$dir/bin"
schema="$dir/schema/postgresql/v12"
manifest="$dir/manifest.json"
mkdir -p "$cache"

# 2. Debian's PostgreSQL server binaries (the tier runs a private instance; the system one is never touched).
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | while read -r d; do [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && echo "$d"; done | tail -n 1; }
if [ -z "$(pg_bin)" ]; then
  if [ "$(id -u)" != 0 ]; then
    die "PostgreSQL's server is not installed; run as root or: sudo apt-get install -y postgresql"
  fi
  say "installing Debian's PostgreSQL server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
pgbin=$(pg_bin)

# 2b. Debian's Slurm and munge: the tier starts its own munged, slurmctld and two slurmd (test/cluster/slurm.ts).
if ! { [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && [ -x /usr/bin/srun ] && [ -x /usr/sbin/munged ] && [ -x /usr/sbin/mungekey ]; }; then
  if [ "$(id -u)" != 0 ]; then
    die "Slurm and munge are not installed; run as root or: sudo apt-get install -y --no-install-recommends slurm-wlm slurm-client munge"
  fi
  say "installing Debian's Slurm and munge"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm slurm-client munge >/dev/null
fi
[ -n "$pgbin" ] || die "no initdb/pg_ctl under /usr/lib/postgresql/*/bin"
# --packages: only the Debian packages (scripts/test.sh installs them first, so that apt never runs twice at once,
# then builds the rest in the background while the other tiers run).
[ "${1:-}" = --packages ] && exit 0
pg_version=$("$pgbin/postgres" --version | awk '{print $3}') # "postgres (PostgreSQL) 15.18 (Debian …)"

# 3. The Temporal server and SQL tool, built once per release. The stamp names what was built and how.
#    Go: the one on PATH or in /usr/local/go; on a machine with neither (a CI runner, say), the toolchain the
#    release's go.mod asks for, fetched from the Go module proxy, the same place the modules come from (Go's own
#    toolchain switching, GOTOOLCHAIN, downloads it from there too).
go=$(command -v go || true)
[ -n "$go" ] || go=/usr/local/go/bin/go
if [ ! -x "$go" ]; then
  proxy=${GOPROXY:-https://proxy.golang.org}
  proxy=${proxy%%[,|]*}
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64 | arm64) arch=arm64 ;; *) die "no Go toolchain for $(uname -m)" ;; esac
  go_version=$(curl -fsSL "$proxy/go.temporal.io/server/@v/v$version.mod" | sed -n 's/^go \([0-9][0-9.]*\)$/\1/p')
  [ -n "$go_version" ] || die "Go is not installed, and $proxy gave no go.mod for go.temporal.io/server@v$version"
  go_root="$cache/go-toolchain/go$go_version.linux-$arch"
  go="$go_root/bin/go"
  if [ ! -x "$go" ]; then
    say "Go is not installed: fetching go$go_version from $proxy"
    zip="$cache/go-toolchain/go$go_version.zip"
    mkdir -p "$cache/go-toolchain"
    curl -fsSL -o "$zip.part" "$proxy/golang.org/toolchain/@v/v0.0.1-go$go_version.linux-$arch.zip" || die "could not fetch go$go_version from $proxy"
    rm -rf "$go_root.new" && mkdir -p "$go_root.new"
    python3 -m zipfile -e "$zip.part" "$go_root.new" || die "could not unpack $zip.part"
    # The module zip holds one folder, golang.org/toolchain@v0.0.1-goX.linux-arch, that is a GOROOT.
    rm -rf "$go_root" && mv "$go_root.new"/golang.org/toolchain@* "$go_root" && rm -rf "$go_root.new" "$zip.part"
    chmod -R u+x "$go_root/bin" "$go_root/pkg/tool"
  fi
fi
[ -x "$go" ] || die "Go is not installed (go on PATH or /usr/local/go/bin/go); https://go.dev/dl/"
tags=disable_grpc_modules # as the release's own Makefile builds its binaries (ALL_BUILD_TAGS)
want="go.temporal.io/server@v$version tags=$tags CGO_ENABLED=0"
if [ -x "$bin/temporal-server" ] && [ -x "$bin/temporal-sql-tool" ] && [ -d "$schema/temporal/versioned" ] \
   && [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$want" ]; then
  say "Temporal server $version: built ($bin)"
else
  export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOFLAGS=-modcacherw CGO_ENABLED=0
  say "building Temporal server $version and temporal-sql-tool from Go modules ($("$go" version | awk '{print $3}'); the first time downloads ~1.5 GB and takes minutes)"
  src=$("$go" mod download -json "go.temporal.io/server@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src/cmd/server" ] && [ -d "$src/cmd/tools/sql" ] || die "go.temporal.io/server@v$version has no cmd/server or cmd/tools/sql (in $src)"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # Built inside the module, so its own go.mod and go.sum pin every dependency (as the release's Makefile does).
  (cd "$src" && "$go" build -tags "$tags" -o "$tmp/temporal-sql-tool" ./cmd/tools/sql)
  (cd "$src" && "$go" build -tags "$tags" -o "$tmp/temporal-server" ./cmd/server)
  mkdir -p "$tmp/schema/postgresql"
  cp -R "$src/schema/postgresql/v12" "$tmp/schema/postgresql/v12"
  chmod -R u+w,go+rX "$tmp/schema"
  rm -rf "$dir.new" && mkdir -p "$dir.new" && mv "$tmp/schema" "$dir.new/schema" && mkdir "$dir.new/bin" \
    && mv "$tmp/temporal-server" "$tmp/temporal-sql-tool" "$dir.new/bin/"
  echo "$want" > "$dir.new/.stamp"
  rm -rf "$dir" && mv "$dir.new" "$dir"
  say "built in $(( $(date +%s) - t0 ))s: $bin"
fi
built_version=$("$bin/temporal-server" --version 2>&1 | awk '{print $NF}') || die "$bin/temporal-server does not run"
[ "$built_version" = "$version" ] || die "$bin/temporal-server says it is $built_version, docker-compose.yml pins $version"

# 3b. The Web UI server of the release docker-compose.yml pins (`temporalio/ui:X.Y.Z`): the module
#     github.com/temporalio/ui-server/v2@vX.Y.Z carries the built UI (embedded) and the image's config template
#     (config/docker.yaml, rendered from the service's environment as the image does).
ui_version=$(sed -n 's#^[[:space:]]*image:[[:space:]]*temporalio/ui:\([0-9][0-9.]*\)[[:space:]]*$#\1#p' docker-compose.yml | head -n 1)
[ -n "$ui_version" ] || die "no 'image: temporalio/ui:X.Y.Z' line in docker-compose.yml"
ui_dir="$cache/temporal-ui-$ui_version"
ui_want="github.com/temporalio/ui-server/v2@v$ui_version CGO_ENABLED=0"
if [ -x "$ui_dir/bin/ui-server" ] && [ -f "$ui_dir/config/docker.yaml" ] && [ "$(cat "$ui_dir/.stamp" 2>/dev/null)" = "$ui_want" ]; then
  say "Temporal Web UI $ui_version: built ($ui_dir/bin)"
else
  export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOFLAGS=-modcacherw CGO_ENABLED=0
  say "building the Temporal Web UI server $ui_version from Go modules"
  ui_src=$("$go" mod download -json "github.com/temporalio/ui-server/v2@v$ui_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$ui_src/cmd/server" ] && [ -f "$ui_src/config/docker.yaml" ] || die "github.com/temporalio/ui-server/v2@v$ui_version has no cmd/server or config/docker.yaml (in $ui_src)"
  rm -rf "$ui_dir.new" && mkdir -p "$ui_dir.new/bin"
  (cd "$ui_src" && "$go" build -o "$ui_dir.new/bin/ui-server" ./cmd/server)
  cp -R "$ui_src/config" "$ui_dir.new/config" && chmod -R u+w,go+rX "$ui_dir.new/config"
  echo "$ui_want" > "$ui_dir.new/.stamp"
  rm -rf "$ui_dir" && mv "$ui_dir.new" "$ui_dir"
  say "built the Web UI server in $(( $(date +%s) - t0 ))s: $ui_dir/bin/ui-server"
fi

# 4. The manifest the harness reads (rewritten each time: PostgreSQL may have been upgraded since the build).
temporal_cli="$root/.venv/bin/temporal"
[ -x "$temporal_cli" ] || say "warning: no Temporal CLI at $temporal_cli (setup-temporal.sh needs it): run make setup"
cat > "$manifest.tmp" <<EOF
{
  "version": "$version",
  "server": "$bin/temporal-server",
  "sqlTool": "$bin/temporal-sql-tool",
  "schemaDir": "$schema",
  "pgBin": "$pgbin",
  "pgVersion": "$pg_version",
  "uiVersion": "$ui_version",
  "uiServer": "$ui_dir/bin/ui-server",
  "uiRoot": "$ui_dir"
}
EOF
mv "$manifest.tmp" "$manifest"
say "ready in $(( $(date +%s) - t0 ))s: Temporal server $version, Web UI $ui_version, PostgreSQL $pg_version ($pgbin); manifest $manifest"
