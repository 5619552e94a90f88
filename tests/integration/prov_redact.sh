#!/usr/bin/env bash
# tests/integration/prov_redact.sh: a store URI's password never reaches an output (issue 34 row 5). Every output of
# an init, a recorded run (text, --json, SLUICE_PROV), a report page and every error path (a server that refuses,
# --record-optional's warning, a conninfo string, a connection lost mid-run) is collected and grepped for the
# password: the user:PASSWORD@ form, ?password= in the URI's query and key=value conninfo. Without a server only
# the error paths run; with the ctest fixture's PostgreSQL ($SL_PG_DIR, trust authentication, so any password is
# accepted) the successful paths too.
set -uo pipefail
CLI=${SL_CLI:?SL_CLI is the sluice binary}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-redact-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
PW=Sekr3tPW9q
O="$T/out" # every output of every command, and every file written, ends up under here
mkdir "$O"
cd "$T" # a store argument taken for a file name lands here
n=0
run() { # RC_WANTED CMD...: runs CMD, its stdout and stderr kept in $O/N.*
  local want=$1; shift
  n=$((n + 1))
  [ -z "${SL_REDACT_TRACE:-}" ] || echo "$(date +%s.%N) $*" >&2
  "$@" > "$O/$n.out" 2> "$O/$n.err" < /dev/null
  local rc=$?
  [ "$want" = any ] || [ $rc -eq "$want" ] || fail "'$*' exited $rc, wanted $want: $(cat "$O/$n.out" "$O/$n.err")"
  last="$(cat "$O/$n.out" "$O/$n.err")"
}
echo '{"name": "r", "ops": [{"op": "range", "stop": 200}]}' > "$T/s.json"
echo '{"name": "slow", "ops": [{"op": "range", "stop": 300}, {"op": "map", "fn": "sleep_io", "args": {"us": 10000}}]}' > "$T/slow.json"

# ---- error paths, no server needed: port 1 refuses
BAD=("postgresql://u:$PW@127.0.0.1:1/x?connect_timeout=3" "postgresql://u@127.0.0.1:1/x?sslmode=disable&password=$PW"
     "postgres://u:$PW@127.0.0.1:1/x" "host=127.0.0.1 port=1 password=$PW dbname=x")
for u in "${BAD[@]}"; do
  run 1 "$CLI" prov init "$u"
  echo "$last" | grep -q "cannot open" || fail "init: $last"
  run 1 "$CLI" prov init "$u" --json
  run 1 "$CLI" prov ls "$u"
  run 1 "$CLI" prov report "$u" -o "$O/bad.html"
  run 1 "$CLI" prov stats "$u" --json
  run 1 "$CLI" run "$T/s.json" --record "$u"
  echo "$last" | grep -q "cannot record the run in" || fail "record: $last"
  run 1 "$CLI" run "$T/s.json" --record "$u" --json
  run 0 "$CLI" run "$T/s.json" --record "$u" --record-optional
  echo "$last" | grep -q "warning: the run will not be recorded in" || fail "optional: $last"
  run 0 env SLUICE_PROV="$u" "$CLI" run "$T/s.json" --record-optional --json
  run 1 env SLUICE_PROV="$u" "$CLI" run "$T/s.json"
  run any env SLUICE_PROV="$u" "$CLI" trace "$T/s.json" -o "$O/t.json"
done
# ---- issue 47 row 5: a password holding any printable ASCII character, a tab or UTF-8, raw and percent-encoded,
# in the userinfo, the query and a quoted conninfo value; libpq's own messages about what it misreads included
pct() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
chars=($'\t' "é" "密码" "🔑")
for c in $(seq 32 126); do chars+=("$(printf "\\$(printf %o "$c")")"); done
for c in "${chars[@]}"; do
  pw="ab${c}$PW"
  e=$(pct "$pw")
  sq=${pw//\\/\\\\}
  sq=${sq//\'/\\\'}
  if [[ $c =~ ^[A-Za-z0-9]$ ]]; then # nothing a parser reads: one form, one output path
    run 1 "$CLI" prov ls "postgresql://u:$pw@127.0.0.1:1/x"
    continue
  fi
  u="postgresql://u:$pw@127.0.0.1:1/x" # each output path: stderr, --json's "error", the optional record's warning
  run 1 "$CLI" prov ls "$u"
  run 1 "$CLI" run "$T/s.json" --record "$u" --json
  run 0 env SLUICE_PROV="$u" "$CLI" run "$T/s.json" --record-optional
  run 1 "$CLI" prov ls "postgresql://u:$e@127.0.0.1:1/x?sslmode=disable"
  run 1 "$CLI" run "$T/s.json" --record "postgresql://u@127.0.0.1:1/x?password=$pw" --json
  run 1 "$CLI" prov ls "host=127.0.0.1 port=1 password='$sq' dbname=x"
done
# the URI is named, its password is not
grep -rq "postgresql://u:\*\*\*@127.0.0.1:1/x" "$O" || fail "the redacted URI is not named in any message"
grep -rq "password=\*\*\*" "$O" || fail "the redacted password= is not named in any message"

# ---- the successful paths against the fixture's server
if [ -n "${SL_PG_DIR:-}" ] && [ -f "$SL_PG_DIR/uri" ]; then
  ADMIN=$(cat "$SL_PG_DIR/uri")
  db="it_redact_$$"
  psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" > /dev/null || fail "create $db"
  hostport=${ADMIN#postgresql://sluice@}
  hostport=${hostport%%/*}
  U1="postgresql://sluice:$PW@$hostport/$db"
  U2="postgresql://sluice@$hostport/$db?password=$PW"
  for u in "$U1" "$U2"; do
    run 0 "$CLI" prov init "$u"
    echo "$last" | grep -q "store ready at postgresql://sluice" || fail "init: $last"
    run 0 "$CLI" prov init "$u" --json
    run 0 "$CLI" run "$T/s.json" --record "$u"
    echo "$last" | grep -q "recorded as execution [0-9]* in postgresql://sluice" || fail "recorded: $last"
    run 0 "$CLI" run "$T/s.json" --record "$u" --json
    run 0 env SLUICE_PROV="$u" "$CLI" run "$T/s.json"
    run 0 env SLUICE_PROV="$u" "$CLI" trace "$T/s.json" -o "$O/t2.json"
    run 0 "$CLI" prov ls "$u" executions
    run 0 "$CLI" prov fleet "$u"
  done
  run 0 "$CLI" prov gen "$U1" --pipelines 2 --days 10 --seed 3 --append
  run 0 "$CLI" prov report "$U1" -o "$O/r.html"
  grep -q "<title>sluice prov report: postgresql://sluice:\*\*\*@" "$O/r.html" || fail "report title: $(grep -o '<title>[^<]*' "$O/r.html")"
  run 0 "$CLI" prov report "$U2" -o "$O/r2.html"
  run 0 "$CLI" prov stats "$U1" --json
  # the connection lost mid-run: the message says the execution stays RUNNING, and still no password
  execs() { psql -qtA "${ADMIN%/*}/$db" -c 'SELECT count(*) FROM execution'; }
  before=$(execs)
  "$CLI" run "$T/slow.json" --record "$U1" > "$O/lost.out" 2> "$O/lost.err" &
  pid=$!
  for _ in $(seq 1 600); do # until the run has recorded itself RUNNING (no clock limit: the machine may be loaded)
    [ "$(execs)" -gt "$before" ] && break
    sleep 0.05
  done
  # the server lost to this run: no new connection to its database, the open ones cut
  psql -qtA "$ADMIN" -c "ALTER DATABASE $db ALLOW_CONNECTIONS false" \
    -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$db'" > /dev/null
  wait $pid
  rc=$?
  [ $rc -ne 0 ] || fail "a run whose store connection was lost exited 0: $(cat "$O/lost.err")"
  grep -q "execution [0-9]* stays RUNNING" "$O/lost.err" || fail "lost connection: $(cat "$O/lost.err")"
  psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" > /dev/null
fi

if grep -rl -- "$PW" "$O"; then
  grep -r -- "$PW" "$O" | head -5
  fail "the password was printed (files above)"
fi
echo "ok: $n commands, no password in their outputs"
