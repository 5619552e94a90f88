#!/usr/bin/env bash
# record_runs.sh: `--record DB` and SLUICE_PROV on run, trace and optimize put executions (with the data files as
# inputs and the trace/tuned spec as outputs) into an ML Metadata store; a failing run is recorded as FAILED; a run
# tuned online (--tuner) keeps its tuner's change list.
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
# `run --tuner sluice --record`: the tuner's name, solves and change list (a JSON array, the same as `run --json`
# gives) are custom properties of the run's execution. Whether the tuner changes a knob in 1 s depends on the
# machine; the list is asserted to be a list, and to hold the changes the run printed.
cat > "$T/spin.json" <<J
{"name": "tuned", "ops": [{"op": "range", "stop": 100000000},
 {"op": "map", "fn": "spin", "args": {"us": 10}, "parallelism": "autotune"},
 {"op": "map", "fn": "spin", "args": {"us": 200}, "parallelism": "autotune"}, {"op": "prefetch", "buffer": "autotune"}]}
J
out=$("$S" run "$T/spin.json" --seconds 2.5 --tuner sluice --json --record "$T/t.db" 2>/dev/null) || fail "run --tuner sluice --record"
show=$("$S" prov show "$T/t.db" e:1 --json) || fail "prov show e:1"
python3 - "$out" "$show" <<'P' || fail "the recorded tuner changes differ from the run's: $show"
import json, sys
run, show = json.loads(sys.argv[1]), json.loads(sys.argv[2])
props = show["nodes"][0]["custom_properties"]
assert props["tuner"] == "sluice", props
assert props["tuner_solves"] == run["tuner_rounds"], (props["tuner_solves"], run["tuner_rounds"])
changes = json.loads(props["tuner_changes"])
assert isinstance(changes, list) and changes == run["tuner_changes"], (changes, run["tuner_changes"])
for c in changes:
    assert {"t", "op", "knob", "from", "to", "reason"} <= set(c), c
P
"$S" run "$T/spin.json" --seconds 0.5 --tuner autotune --quiet --record "$T/t.db" > /dev/null 2>&1 || fail "run --tuner autotune --record"
"$S" prov show "$T/t.db" e:2 | grep -q 'tuner .*autotune' || fail "the autotune run does not name its tuner"
"$S" prov show "$T/t.db" e:2 | grep -q 'tuner_changes' && fail "the autotune run has a change list it never made"
echo "record_runs: all checks passed"
