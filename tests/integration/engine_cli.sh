#!/usr/bin/env bash
# engine_cli.sh: `sluice run` and `sluice validate` as a user drives them: output, exit codes, errors, Ctrl-C.
set -u
S=${SL_CLI:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat > "$T/ok.json" <<'J'
{"name": "ok", "ops": [{"op": "range", "stop": 1000}, {"op": "map", "fn": "spin", "args": {"us": 1}, "parallelism": 2},
 {"op": "batch", "size": 10}, {"op": "prefetch", "buffer": 2}]}
J
out=$("$S" run "$T/ok.json" --quiet) || fail "run failed"
echo "$out" | grep -q "100 elements (1000 examples)" || fail "run output: $out"
js=$("$S" run "$T/ok.json" --json --take 7) || fail "run --json"
echo "$js" | grep -q '"elements": 7' || fail "--take: $js"
"$S" validate "$T/ok.json" | grep -q "ok (4 ops)" || fail "validate"
"$S" run --help | grep -q "usage: sluice run" || fail "run --help"
"$S" --version | grep -q "sluice " || fail "--version"

printf '{"ops": [\n {"op": "range",, }]}' > "$T/bad.json"
err=$("$S" run "$T/bad.json" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "malformed spec exit code $rc"
echo "$err" | grep -q "bad.json:2:" || fail "malformed spec message: $err"

echo '{"ops": [{"op": "range", "stop": 5}, {"op": "batch", "size": -1}]}' > "$T/neg.json"
err=$("$S" validate "$T/neg.json" 2>&1) && fail "negative size accepted"
echo "$err" | grep -q "ops\[1\].size" || fail "negative size message: $err"

"$S" run 2>/dev/null; [ $? -eq 2 ] || fail "missing SPEC should be a usage error"
"$S" frobnicate 2>/dev/null; [ $? -eq 2 ] || fail "unknown command should be a usage error"

# Ctrl-C: a clean stop with a summary and exit code 130
echo '{"name": "slow", "ops": [{"op": "range"}, {"op": "map", "fn": "sleep_io", "args": {"us": 2000}, "parallelism": 2}]}' > "$T/slow.json"
"$S" run "$T/slow.json" --quiet > "$T/int.out" 2> "$T/int.err" &
pid=$!
# A background job starts with SIGINT ignored until the CLI installs its handler, which a loaded machine may delay:
# send it until the run stops (not once after a fixed sleep).
for _ in $(seq 1 300); do
  sleep 0.2
  kill -INT $pid 2>/dev/null || break
  grep -q "interrupted after" "$T/int.err" 2>/dev/null && break
done
wait $pid; rc=$?
[ $rc -eq 130 ] || fail "SIGINT exit code $rc"
grep -q "elements" "$T/int.out" || fail "no summary after SIGINT"
grep -q "interrupted after" "$T/int.err" || fail "no interrupt note"
echo "engine_cli: all checks passed"
