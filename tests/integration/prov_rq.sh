#!/usr/bin/env bash
# prov_rq.sh: `sluice prov overlap`, `prov ablation` and `prov fleet` from the command line: the --json keys the docs
# promise, the same overlap on SQLite and PostgreSQL for one corpus, and the fleet of runs recorded with --record
# where a planted spin map is the busiest op.
set -euo pipefail
CLI=${SL_CLI:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$CLI" prov gen "$T/c.db" --pipelines 4 --days 40 --seed 3 >/dev/null

"$CLI" prov overlap "$T/c.db" --top 2 | grep -q "reuse would save" || fail "overlap text"
"$CLI" prov overlap "$T/c.db" --json --top 2 > "$T/ov.json"
python3 - "$T/ov.json" <<'P' || fail "overlap json"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["types"]:
    for k in ("type", "executions", "with_overlap", "mean_overlap", "cost", "recomputed_cost"):
        assert k in r, k
    assert 0 <= r["mean_overlap"] <= 1 and r["recomputed_cost"] <= r["cost"] + 1e-6
assert len(d["pipelines"]) == 2 and "pipeline" in d["pipelines"][0]
t = d["total"]
assert t["executions"] == sum(r["executions"] for r in d["types"])
assert t["reusable_cost"] <= t["recomputed_cost"] + 1e-6 and 0 < t["share_of_all_compute"] < 1
P
if "$CLI" prov overlap "$T/c.db" --top -1 2>/dev/null; then fail "--top -1 accepted"; fi
if "$CLI" prov ablation "$T/c.db" --seeds 0 2>/dev/null; then fail "--seeds 0 accepted"; fi
if "$CLI" prov overlap "$T/c.db" --pipeline 2>/dev/null; then fail "--pipeline without a value accepted"; fi
# --top 0 shows every pipeline, as in graphlets and waste
n=$("$CLI" prov overlap "$T/c.db" --top 0 --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["pipelines"]))')
[ "$n" -ge 2 ] || fail "--top 0 showed $n pipelines"

"$CLI" prov ablation "$T/c.db" --seeds 2 --trees 10 --json > "$T/ab.json"
python3 - "$T/ab.json" <<'P' || fail "ablation json"
import json, sys
d = json.load(open(sys.argv[1]))
names = [g["name"] for g in d["groups"]]
assert names == ["input", "history", "code", "input+history", "all"], names
for g in d["groups"]:
    for k in ("name", "roc_auc", "pr_auc", "saved_share", "roc_auc_sd"):
        assert k in g, k
assert d["seeds"] == 2
P

# Fleet: two recorded runs of a spec whose spin map (parallelism 1) is by far the busiest op, and a failed run
# (recorded under its spec's path when the spec did not open).
printf 'a\nb\nc\n' > "$T/data.txt"
cat > "$T/p.json" <<J
{"name": "spinner", "ops": [{"op": "files", "list": ["$T/data.txt"]}, {"op": "lines"},
 {"op": "map", "fn": "spin", "args": {"us": 200}, "parallelism": 1}, {"op": "repeat", "count": 300}]}
J
"$CLI" run "$T/p.json" --quiet --record "$T/m.db" >/dev/null 2>&1 || fail "run --record"
"$CLI" run "$T/p.json" --quiet --record "$T/m.db" >/dev/null 2>&1 || fail "run --record (2)"
echo '{"name": "spinner", "ops": [{"op": "files", "list": ["'$T'/data.txt"]}, {"op": "lines"}, {"op": "map", "fn": "parse_example"}]}' > "$T/bad.json"
"$CLI" run "$T/bad.json" --quiet --record "$T/m.db" >/dev/null 2>&1 && fail "bad run succeeded"
"$CLI" prov fleet "$T/m.db" | grep -q "spinner" || fail "fleet text"
"$CLI" prov fleet "$T/m.db" --json > "$T/fl.json"
python3 - "$T/fl.json" <<'P' || fail "fleet json"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["pipelines"][0]
assert p["pipeline"] == "spinner" and p["runs"] == 2, p
assert p["load_known"] == 2 and p["cpu_seconds"] > 0
assert p["bottlenecks"][0]["count"] == 2 and "spin" in p["bottlenecks"][0]["op"], p["bottlenecks"]
assert d["total"]["runs"] == 2 and d["total"]["failed"] == 1, d["total"]
P
"$CLI" prov fleet "$T/c.db" | grep -q "no recorded sluice runs" || fail "fleet on a store without runs"

# The report shows the overlap chart, the reuse figure and, once runs are recorded into the store, the fleet.
"$CLI" prov report "$T/c.db" -o "$T/r0.html" 2>/dev/null || fail "report"
grep -q 'id="overlap"' "$T/r0.html" && grep -q 'id="reuse"' "$T/r0.html" || fail "report: no overlap chart"
grep -q 'id="fleet"' "$T/r0.html" && fail "report: a fleet section without recorded runs"
"$CLI" run "$T/p.json" --quiet --record "$T/c.db" >/dev/null 2>&1 || fail "run --record into the corpus"
"$CLI" prov report "$T/c.db" -o "$T/r1.html" 2>/dev/null || fail "report with runs"
grep -q 'id="fleet"' "$T/r1.html" && grep -q 'spinner' "$T/r1.html" || fail "report: no fleet section"

# PostgreSQL, when the fixture started a server: the same corpus gives the same overlap.
if [ -n "${SL_PG_DIR:-}" ] && [ -f "$SL_PG_DIR/uri" ]; then
  ADMIN=$(cat "$SL_PG_DIR/uri")
  db="it_rq_$$"
  psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  PGURI="${ADMIN%/*}/$db"
  "$CLI" prov gen "$PGURI" --pipelines 4 --days 40 --seed 3 >/dev/null || fail "pg gen"
  "$CLI" prov overlap "$PGURI" --json --top 2 > "$T/ovpg.json"
  cmp -s "$T/ov.json" "$T/ovpg.json" || fail "pg and sqlite overlap differ"
  "$CLI" prov fleet "$PGURI" --json >/dev/null || fail "pg fleet"
  psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
fi
echo "prov_rq: ok"
