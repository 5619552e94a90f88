#!/usr/bin/env bash
# knob_bounds.sh: knob values past their documented upper bounds (2^32 and neighbours, which once crashed with
# SIGFPE or silently became 1 through 32-bit truncation) are refused by validate and run with the knob's JSON path
# and its valid range (issue 34 row 3; the interleave values of row 6 that deadlocked are here too).
set -u
S=${SL_CLI:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-knobs-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$T"
# refused OP_JSON NEEDLE: validate and run both exit 1 (not a signal) and name the knob and its range.
refused() {
  echo "{\"ops\": [{\"op\": \"range\", \"stop\": 10}, $1]}" > k.json
  for cmd in validate run; do
    out=$("$S" $cmd k.json 2>&1); rc=$?
    [ $rc -eq 1 ] || fail "$cmd $1: exit $rc: $out"
    echo "$out" | grep -qF -- "$2" || fail "$cmd $1: no '$2' in: $out"
  done
}
refused '{"op": "prefetch", "buffer": 4294967296}' "ops[1].buffer: 4294967296 is out of range (valid: 1..65536)"
refused '{"op": "prefetch", "buffer": 4294967297}' "ops[1].buffer: 4294967297 is out of range (valid: 1..65536)"
refused '{"op": "map", "fn": "identity", "parallelism": 2, "buffer": 4294967296}' \
  "ops[1].buffer: 4294967296 is out of range (valid: 0..65536)"
refused '{"op": "map", "fn": "identity", "parallelism": 2, "buffer": 4294967297}' \
  "ops[1].buffer: 4294967297 is out of range (valid: 0..65536)"
refused '{"op": "map", "fn": "identity", "parallelism": 1048576}' \
  "ops[1].parallelism: 1048576 is out of range (valid: 1..256)"
refused '{"op": "map", "fn": "identity", "parallelism": 4294967298}' \
  "ops[1].parallelism: 4294967298 is out of range (valid: 1..256)"
refused '{"op": "interleave", "parallelism": 2, "buffer": 4294967296, "source": [{"op": "range", "stop": 3}]}' \
  "ops[1].buffer: 4294967296 is out of range (valid: 1..1024)"
refused '{"op": "interleave", "parallelism": 2, "buffer": 1099511627776, "source": [{"op": "range", "stop": 3}]}' \
  "ops[1].buffer: 1099511627776 is out of range (valid: 1..1024)"
refused '{"op": "interleave", "cycle_length": 4096, "buffer": 1024, "source": [{"op": "range", "stop": 3}]}' \
  "65536"
# At the bounds, the same ops run (the buffers allocate as they fill, not by their capacity).
echo '{"ops": [{"op": "range", "stop": 1000}, {"op": "map", "fn": "identity", "parallelism": 256, "buffer": 65536},
  {"op": "prefetch", "buffer": 65536}, {"op": "interleave", "parallelism": 2, "cycle_length": 64, "buffer": 1024,
  "source": [{"op": "range", "stop": 3}]}]}' > max.json
out=$("$S" run max.json --quiet --json) || fail "run at the bounds: $out"
echo "$out" | grep -q '"elements": 3000' || fail "run at the bounds: $out"
exit 0
