#!/usr/bin/env bash
# tools/pg_start.sh DIR: starts a throw-away PostgreSQL 15 server for the provenance tests, listening on
# 127.0.0.1 at a free port with its socket in DIR, trust authentication, superuser `sluice`. Writes the URI
# of its `postgres` database to DIR/uri. As root the server runs as the unprivileged `postgres` user (initdb
# refuses root); otherwise as the caller. Stop it with tools/pg_stop.sh DIR.
set -euo pipefail
dir=${1:?usage: pg_start.sh DIR}
bin=${PG_BIN:-}
if [ -z "$bin" ]; then
  for v in 17 16 15 14 13; do
    if [ -x /usr/lib/postgresql/$v/bin/initdb ]; then bin=/usr/lib/postgresql/$v/bin; break; fi
  done
fi
[ -n "$bin" ] || { echo "pg_start: no PostgreSQL server found (apt-get install postgresql)" >&2; exit 1; }
# A server left behind by an interrupted run: stop it and start clean.
if [ -e "$dir" ]; then
  bash "$(dirname "$0")/pg_stop.sh" "$dir"
  rm -rf "$dir"
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
as=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$dir"
  chmod 700 "$dir"
  as=(runuser -u postgres --)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U sluice >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log" >&2; exit 1; }
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" \
  -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50" -w start >/dev/null \
  || { cat "$dir/server.log" >&2; exit 1; }
echo "$bin" >"$dir/bin"
echo "postgresql://sluice@127.0.0.1:$port/postgres" >"$dir/uri"
cat "$dir/uri"
