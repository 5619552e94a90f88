#!/usr/bin/env bash
# tools/pg_stop.sh DIR: stops the server tools/pg_start.sh started in DIR and removes DIR.
set -uo pipefail
dir=${1:?usage: pg_stop.sh DIR}
[ -f "$dir/bin" ] || { rm -rf "$dir"; exit 0; }
bin=$(cat "$dir/bin")
as=()
[ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1
rm -rf "$dir"
