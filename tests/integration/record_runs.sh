#!/usr/bin/env bash
# record_runs.sh: `--record DB` and SLUICE_PROV on run, trace and optimize put executions (with the data files as
# inputs and the trace/tuned spec as outputs) into an ML Metadata store; a failing run is recorded as FAILED.
set -u
S=${SL_CLI:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
printf 'a\nb\nc\n' > "$T/data.txt"
cat > "$T/p.json" <<J
{"name": "rec", "ops": [{"op": "files", "list": ["$T/data.txt"]}, {"op": "lines"},
 {"op": "map", "fn": "spin", "args": {"us": 50}, "parallelism": "autotune"}, {"op": "repeat", "count": 200}]}
J
"$S" run "$T/p.json" --quiet --record "$T/m.db" > /dev/null 2>&1 || fail "run --record"
SLUICE_PROV="$T/m.db" "$S" trace "$T/p.json" -o "$T/t.json" --seconds 0.5 --quiet --no-disk 2>/dev/null || fail "trace"
"$S" optimize "$T/p.json" -o "$T/tuned.json" --seconds 0.5 --measure 0.5 --record "$T/m.db" > /dev/null 2>&1 || fail "optimize"
echo '{"name": "rec", "ops": [{"op": "files", "list": ["'$T'/data.txt"]}, {"op": "lines"}, {"op": "map", "fn": "parse_example"}]}' > "$T/bad.json"
"$S" run "$T/bad.json" --quiet --record "$T/m.db" > /dev/null 2>&1 && fail "bad run succeeded"
js=$("$S" prov ls "$T/m.db" executions --json) || fail "prov ls"
n=$(echo "$js" | grep -o '"id"' | wc -l)
[ "$n" -eq 4 ] || fail "expected 4 executions, got $n: $js"
echo "$js" | grep -q 'sluice.Optimize' || fail "no sluice.Optimize execution"
echo "$js" | grep -q 'FAILED' || fail "the failed run is not FAILED"
arts=$("$S" prov ls "$T/m.db" artifacts --json)
echo "$arts" | grep -q "data.txt" || fail "the data file is not an input artifact"
echo "$arts" | grep -q "tuned.json" || fail "the tuned spec is not an output artifact"
echo "$arts" | grep -q "t.json" || fail "the trace is not an output artifact"
echo "record_runs: all checks passed"
