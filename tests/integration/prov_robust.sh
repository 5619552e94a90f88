#!/usr/bin/env bash
# prov_robust.sh: the provenance rows of issue 20's CLI table. `prov gen` refuses a store with data unless
# --append; Ctrl-C / SIGTERM during `prov gen` says one line, exits 130/143 and leaves a consistent store (whole
# pipelines, indexes in place); `run --record` fails on a store that cannot take the record unless
# --record-optional, and records the execution RUNNING at its start so that a killed run stays visible; option
# values out of range are refused naming the range; `graphlets --top N --json` lists N.
set -u
CLI=${SL_CLI:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() { # RC CMD...: stdout+stderr in $out
  local want=$1; shift
  out=$("$@" 2>&1); local rc=$?
  [ $rc -eq "$want" ] || fail "'$*' exited $rc, wanted $want: $out"
}
count() { # DB TABLE: rows (a reader beside a writer sees its committed transactions)
  python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM " + sys.argv[2]).fetchone()[0])' "$1" "$2"
}
indexes() { python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM sqlite_master WHERE type = '"'"'index'"'"'").fetchone()[0])' "$1"; }

# prov gen into a store that has data: refused naming the store; --append adds a second corpus
DB="$T/p.db"
expect 0 "$CLI" prov gen "$DB" --pipelines 3 --days 20 --seed 2
n1=$(count "$DB" Execution)
expect 1 "$CLI" prov gen "$DB" --pipelines 3 --days 20 --seed 2
echo "$out" | grep -q "$DB already has data; --append" || fail "refusal: $out"
[ "$(count "$DB" Execution)" -eq "$n1" ] || fail "the refused gen wrote"
expect 0 "$CLI" prov gen "$DB" --pipelines 3 --days 20 --seed 3 --append
[ "$(count "$DB" Execution)" -gt "$n1" ] || fail "--append wrote nothing"
expect 0 "$CLI" prov init "$T/empty.db"
expect 0 "$CLI" prov gen "$T/empty.db" --pipelines 2 --days 10 # a store with the schema and no data is fine
want_idx=$(indexes "$T/empty.db")

# Ctrl-C / SIGTERM during prov gen: one line, 130 / 143, whole pipelines and MLMD's indexes kept
for sig in INT TERM; do
  d="$T/int-$sig.db"
  "$CLI" prov gen "$d" --pipelines 5000 --days 120 > "$T/gen.out" 2> "$T/gen.err" &
  pid=$!
  for _ in $(seq 1 1200); do # until a first pipeline is committed (no clock limit: the machine may be loaded)
    [ -f "$d" ] && [ "$(count "$d" Execution 2>/dev/null || echo 0)" -gt 0 ] && break
    kill -0 $pid 2> /dev/null || break
    sleep 0.1
  done
  kill -$sig $pid
  wait $pid; rc=$?
  want=$([ $sig = INT ] && echo 130 || echo 143)
  [ $rc -eq "$want" ] || fail "prov gen after SIG$sig exited $rc: $(cat "$T/gen.err")"
  [ "$(wc -l < "$T/gen.err")" -eq 1 ] || fail "not one line after SIG$sig: $(cat "$T/gen.err")"
  grep -q "^sluice prov gen: .*cancelled after [0-9]* of 5000 pipelines (each written whole) in $d$" "$T/gen.err" \
    || fail "message after SIG$sig: $(cat "$T/gen.err")"
  [ "$(indexes "$d")" -eq "$want_idx" ] || fail "indexes after SIG$sig: $(indexes "$d"), wanted $want_idx"
  expect 0 "$CLI" prov graphlets "$d" --top 1
done

# run --record to an unwritable path or a refused PostgreSQL: rc 1 before running, unless --record-optional
echo '{"name": "ok", "ops": [{"op": "range", "stop": 100}]}' > "$T/ok.json"
for store in "$T/no/such/dir/r.db" "postgresql://127.0.0.1:1/none?connect_timeout=5"; do
  expect 1 "$CLI" run "$T/ok.json" --record "$store" --quiet
  echo "$out" | grep -q "cannot record the run in" || fail "record to $store: $out"
  echo "$out" | grep -q "elements" && fail "ran although the record was refused: $out"
  expect 0 "$CLI" run "$T/ok.json" --record "$store" --record-optional --quiet
  [ "$(echo "$out" | grep -c warning)" -eq 1 ] || fail "--record-optional: not one warning: $out"
  echo "$out" | grep -q "100 elements" || fail "--record-optional did not run: $out"
done
js=$("$CLI" run "$T/ok.json" --record "$T/no/such/dir/r.db" --json 2>/dev/null)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["status"]=="error" and "cannot record" in d["error"], d' "$js" \
  || fail "--json record failure: $js"

# run --record killed with SIGKILL: the execution stays visible as RUNNING; a finished run is COMPLETE
R="$T/runs.db"
echo '{"name": "slow", "ops": [{"op": "range"}, {"op": "map", "fn": "sleep_io", "args": {"us": 2000}}]}' > "$T/slow.json"
"$CLI" run "$T/slow.json" --record "$R" --quiet > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  [ -f "$R" ] && [ "$(count "$R" Execution 2>/dev/null || echo 0)" -gt 0 ] && break
  sleep 0.1
done
kill -KILL $pid
wait $pid 2> /dev/null
expect 0 "$CLI" prov ls "$R" executions
echo "$out" | grep -q "sluice.Run *RUNNING" || fail "killed run not RUNNING: $out"
expect 0 "$CLI" run "$T/ok.json" --record "$R" --quiet
expect 0 "$CLI" prov ls "$R" executions
[ "$(echo "$out" | grep -c "sluice.Run *COMPLETE")" -eq 1 ] && [ "$(echo "$out" | grep -c "RUNNING")" -eq 1 ] \
  || fail "after a finished run: $out"
# a run stopped by SIGTERM is finished in the store too
"$CLI" run "$T/slow.json" --record "$R" --quiet > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  [ "$(count "$R" Execution)" -ge 3 ] && break
  sleep 0.1
done
kill -TERM $pid
wait $pid; rc=$?
[ $rc -eq 143 ] || fail "run --record after SIGTERM exited $rc"
expect 0 "$CLI" prov ls "$R" executions
[ "$(echo "$out" | grep -c "RUNNING")" -eq 1 ] || fail "the SIGTERM'd run was not finished: $out"
echo "$out" | grep -q "sluice.Run *CANCELED" || fail "the SIGTERM'd run is not marked CANCELED: $out"

# option values out of range: refused with the valid range
expect 2 "$CLI" prov should-train "$DB" --pipeline x --threshold 1.5
echo "$out" | grep -q "0..1" || fail "--threshold 1.5: $out"
expect 2 "$CLI" prov should-train "$DB" --pipeline x --threshold -0.5
expect 2 "$CLI" prov waste "$DB" --top -3
echo "$out" | grep -q -- "--top must be 0 (all) or more" || fail "--top -3: $out"
expect 2 "$CLI" prov graphlets "$DB" --top -1

# graphlets --top 2 --json: 2 graphlets ("count" stays the total); without --top, every one
js=$("$CLI" prov graphlets "$DB" --top 2 --json) || fail "graphlets --top 2 --json"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert len(d["graphlets"])==2 and d["count"]>2, (len(d["graphlets"]), d["count"])' "$js" \
  || fail "--top 2 --json"
"$CLI" prov graphlets "$DB" --json > "$T/g.json" || fail "graphlets --json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["graphlets"])==d["count"]' "$T/g.json" \
  || fail "--json: not every graphlet"

# Another tool's store keeps its journal mode: ml-metadata writes TFX's SQLite store in rollback-journal mode, and
# reading it (the should-train gate, the analytics) or recording into it must not turn it to WAL; a store sluice
# creates is WAL.
mode() { python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA journal_mode").fetchone()[0])' "$1"; }
[ "$(mode "$DB")" = wal ] || fail "a store prov gen made is not WAL: $(mode "$DB")"
cp "$DB" "$T/tfx.db"
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("PRAGMA journal_mode=DELETE"); c.close()' "$T/tfx.db"
[ "$(mode "$T/tfx.db")" = delete ] || fail "the test could not set rollback-journal mode"
"$CLI" prov should-train "$T/tfx.db" --pipeline x --threshold 0.5 > /dev/null 2>&1
"$CLI" prov stats "$T/tfx.db" > /dev/null || fail "prov stats of a rollback-journal store"
expect 0 "$CLI" prov gen "$T/tfx.db" --pipelines 1 --days 5 --seed 9 --append
[ "$(mode "$T/tfx.db")" = delete ] || fail "sluice turned another tool's store to $(mode "$T/tfx.db")"
[ ! -e "$T/tfx.db-wal" ] || fail "a -wal file beside a rollback-journal store"
echo "prov_robust: all checks passed"
