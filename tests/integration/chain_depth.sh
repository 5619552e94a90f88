#!/usr/bin/env bash
# chain_depth.sh: an op tree deeper than the documented limit (1000 ops on the longest path, nested interleave
# sources counted) is refused by validate, run, head and trace with an error naming the limit, instead of
# overflowing the stack (issue 34 row 2); a chain at the limit runs, and a deep trace file is refused on load.
set -u
S=${SL_CLI:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-depth-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$T"
# chain N: a range followed by N-1 takes.
chain() { python3 -c "import json,sys; n=int(sys.argv[1]); print(json.dumps({'ops': [{'op': 'range', 'stop': 5}] + [{'op': 'take', 'count': 5}] * (n - 1)}))" "$1"; }
chain 50000 > deep.json
chain 1001 > over.json
chain 1000 > at.json
LIMIT="more than 1000 ops deep"
for f in deep over; do
  out=$("$S" validate $f.json 2>&1); rc=$?
  [ $rc -eq 1 ] || fail "validate $f: exit $rc: $out"
  echo "$out" | grep -qF "ops[1000]: the op chain is $LIMIT" || fail "validate $f: $out"
done
for cmd in run head trace; do
  args=(); [ $cmd = trace ] && args=(-o t.json)
  out=$("$S" $cmd deep.json "${args[@]}" 2>&1); rc=$?
  [ $rc -eq 1 ] || fail "$cmd deep: exit $rc (a crash is >128): $out"
  echo "$out" | grep -qF "$LIMIT" || fail "$cmd deep: $out"
done
"$S" validate at.json | grep -q "ok (1000 ops)" || fail "a chain at the limit is refused"
out=$("$S" run at.json --quiet --json) || fail "run at the limit: $out"
echo "$out" | grep -q '"elements": 5' || fail "run at the limit: $out"
"$S" trace at.json -o at_trace.json > /dev/null 2>&1 || fail "trace at the limit"

# Nested sources count: 2 outer ops + a source of 1000 ops is 1001 deep; 500 outside + 499 inside is fine.
python3 - <<'PY'
import json
src = lambda n: [{"op": "range", "stop": 3}] + [{"op": "take", "count": 3}] * (n - 1)
json.dump({"ops": [{"op": "range", "stop": 2}, {"op": "interleave", "source": src(1000)}]}, open("nested.json", "w"))
json.dump({"ops": [{"op": "range", "stop": 2}, {"op": "interleave", "source": src(499)}]
           + [{"op": "take", "count": 100}] * 498}, open("nested_ok.json", "w"))
PY
out=$("$S" validate nested.json 2>&1) && fail "nested: accepted"
echo "$out" | grep -qF "ops[1]: the op chain is $LIMIT" || fail "nested: $out"
"$S" run nested_ok.json --quiet > /dev/null || fail "nested at the limit"

# A trace file whose consumer chain is deeper than the limit (the planner walks it recursively) is refused.
python3 - <<'PY'
import json
t = json.load(open("at_trace.json"))
ops = t["ops"]
n = len(ops)
extra = []
for k in range(5):  # lengthen the chain below its source, ops[0]
    o = dict(ops[0])
    o["parent"] = 0 if k == 0 else n + k - 1
    extra.append(o)
t["ops"] = ops + extra
json.dump(t, open("deep_trace.json", "w"))
PY
out=$("$S" analyze deep_trace.json 2>&1); rc=$?
[ $rc -eq 1 ] || fail "analyze of a deep trace: exit $rc: $(echo "$out" | tail -3)"
echo "$out" | grep -qF "more than 1000 ops deep" || fail "deep trace: $(echo "$out" | tail -3)"
exit 0
