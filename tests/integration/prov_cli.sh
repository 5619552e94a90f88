#!/usr/bin/env bash
# tests/integration/prov_cli.sh: `sluice prov` as a user drives it: init/ls/show/lineage/export on a recorded
# store, the analytics on a small generated corpus (tables and --json), should-train's exit codes, --help on
# every subcommand, bad inputs with clear messages; and gen/graphlets/should-train against the PostgreSQL server
# of the ctest fixture when there is one ($SL_PG_DIR).
set -euo pipefail
CLI=${SL_CLI:?SL_CLI is the sluice binary}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-prov-it-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
json() { python3 -c 'import json,sys; json.load(sys.stdin)' || fail "not JSON: $1"; }

# --help everywhere
"$CLI" prov --help | grep >/dev/null "should-train" || fail "prov --help"
for s in init ls show lineage export gen graphlets stats waste train simulate should-train; do
  "$CLI" prov "$s" --help | grep >/dev/null "usage: sluice prov $s" || fail "$s --help"
done

# init, then a store with a small generated corpus
DB="$T/mlmd.sqlite"
"$CLI" prov init "$DB" | grep >/dev/null "schema v10" || fail "init"
"$CLI" prov init "$DB" --json | json init
"$CLI" prov gen "$DB" --pipelines 4 --days 30 --seed 5 | grep >/dev/null "generated 4 pipelines" || fail "gen"
"$CLI" prov gen "$T/g2.db" --pipelines 4 --days 30 --seed 5 --json | json gen

# ls / show / lineage / export
"$CLI" prov ls "$DB" types | grep >/dev/null "tfx.components.trainer.component.Trainer" || fail "ls types"
"$CLI" prov ls "$DB" types --json | json "ls types"
"$CLI" prov ls "$DB" contexts --type pipeline | grep >/dev/null "(4 contexts)" || fail "ls contexts"
"$CLI" prov ls "$DB" executions --type tfx.components.trainer.component.Trainer --limit 3 | grep >/dev/null "(3 executions)" \
  || fail "ls executions"
"$CLI" prov ls "$DB" artifacts --limit 5 --json | json "ls artifacts"
TR=$("$CLI" prov ls "$DB" executions --type tfx.components.trainer.component.Trainer --limit 1 --json |
     python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"][0]["id"])')
"$CLI" prov show "$DB" "e:$TR" | grep >/dev/null "cpu_seconds" || fail "show execution"
"$CLI" prov show "$DB" "e:$TR" --json | json "show"
"$CLI" prov show "$DB" c:1 | grep >/dev/null "child contexts" || fail "show context"
"$CLI" prov lineage "$DB" "e:$TR" --up | grep >/dev/null "CsvExampleGen" || fail "lineage up"
"$CLI" prov lineage "$DB" "e:$TR" --down --json | json "lineage"
"$CLI" prov export "$DB" --json -o "$T/export.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema_version"]==10 and len(d["events"])>0' \
  "$T/export.json" || fail "export"

# analytics
"$CLI" prov graphlets "$DB" --top 3 | grep >/dev/null "graphlets," || fail "graphlets"
"$CLI" prov graphlets "$DB" --json | json graphlets
P=$("$CLI" prov graphlets "$DB" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["graphlets"][0]["pipeline"])')
"$CLI" prov graphlets "$DB" --pipeline "$P" | grep >/dev/null "$P" || fail "graphlets --pipeline"
"$CLI" prov stats "$DB" | grep >/dev/null "push rate" || fail "stats"
"$CLI" prov stats "$DB" --json | json stats
"$CLI" prov waste "$DB" --top 2 | grep >/dev/null "wasted compute" || fail "waste"
"$CLI" prov waste "$DB" --json | json waste
"$CLI" prov train "$DB" -o "$T/model.json" --trees 30 | grep >/dev/null "ROC-AUC" || fail "train"
"$CLI" prov train "$DB" -o "$T/model2.json" --trees 30 --json | json train
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["features"])>5 and "window" in d and "booster" in d' \
  "$T/model.json" || fail "model file"
"$CLI" prov simulate "$DB" --model "$T/model.json" | grep >/dev/null "THRESH" || fail "simulate"
"$CLI" prov simulate "$DB" --model "$T/model.json" --json | json simulate
set +e
"$CLI" prov should-train "$DB" --pipeline "$P" --model "$T/model.json" --json > "$T/d.json"; rc=$?
"$CLI" prov should-train "$DB" --pipeline "$P" --threshold 1 >/dev/null; rc_skip=$?
"$CLI" prov should-train "$DB" --pipeline "$P" --threshold 0 >/dev/null; rc_train=$?
"$CLI" prov should-train "$DB" --pipeline no-such >/dev/null 2>"$T/err"; rc_bad=$?
set -e
[ "$rc" = 0 ] || [ "$rc" = 10 ] || fail "should-train exit $rc"
json should-train < "$T/d.json"
[ "$rc_skip" = 10 ] || fail "should-train skip exit $rc_skip"
[ "$rc_train" = 0 ] || fail "should-train train exit $rc_train"
[ "$rc_bad" = 1 ] && grep -q "no pipeline named 'no-such'" "$T/err" || fail "should-train unknown pipeline"

# bad inputs
printf 'this is not a database at all, just some text padding out a page......' > "$T/junk.db"
if "$CLI" prov ls "$T/junk.db" 2>"$T/err"; then fail "junk accepted"; fi
grep -q "not an SQLite database" "$T/err" || fail "junk message"
if "$CLI" prov ls "$T/missing.db" 2>"$T/err"; then fail "missing accepted"; fi
grep -q "no such database file" "$T/err" || fail "missing message"
if "$CLI" prov show "$DB" x:1 2>/dev/null; then fail "bad ref accepted"; fi
if "$CLI" prov ls "$DB" widgets 2>/dev/null; then fail "bad kind accepted"; fi
"$CLI" prov init "$T/empty.db" >/dev/null
if "$CLI" prov graphlets "$T/empty.db" 2>"$T/err"; then fail "graphlets on empty store"; fi
grep -q "no trainer executions" "$T/err" || fail "no-trainer message"

# PostgreSQL, when the fixture started a server
if [ -n "${SL_PG_DIR:-}" ] && [ -f "$SL_PG_DIR/uri" ]; then
  ADMIN=$(cat "$SL_PG_DIR/uri")
  db="it_cli_$$"
  psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  PGURI="${ADMIN%/*}/$db"
  "$CLI" prov init "$PGURI" | grep >/dev/null postgresql || fail "pg init"
  "$CLI" prov gen "$PGURI" --pipelines 2 --days 15 --seed 5 | grep >/dev/null "generated 2 pipelines" || fail "pg gen"
  "$CLI" prov gen "$T/pgtwin.db" --pipelines 2 --days 15 --seed 5 >/dev/null
  a=$("$CLI" prov graphlets "$PGURI" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["count"], d["pushed"])')
  b=$("$CLI" prov graphlets "$T/pgtwin.db" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["count"], d["pushed"])')
  [ "$a" = "$b" ] || fail "pg and sqlite graphlets differ: $a vs $b"
  # The same corpus on both backends exports byte for byte the same.
  "$CLI" prov export "$PGURI" --json -o "$T/pg.json"
  "$CLI" prov export "$T/pgtwin.db" --json -o "$T/lite.json"
  cmp -s "$T/pg.json" "$T/lite.json" || fail "pg and sqlite exports differ"
  PP=$("$CLI" prov graphlets "$PGURI" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["graphlets"][0]["pipeline"])')
  set +e
  "$CLI" prov should-train "$PGURI" --pipeline "$PP" --json >/dev/null; rc=$?
  set -e
  [ "$rc" = 0 ] || [ "$rc" = 10 ] || fail "pg should-train exit $rc"
  "$CLI" prov lineage "$PGURI" e:1 --down >/dev/null || fail "pg lineage"
  psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
fi
echo "prov_cli: ok"
