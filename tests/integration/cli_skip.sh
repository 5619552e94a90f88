#!/usr/bin/env bash
# cli_skip.sh: bad records as issue 20 wants them: a map's "on_error": "skip" drops and counts them, `sluice run`
# shows the counts per op (text and --json) and their reasons, and a bad line of a text/CSV source is named by its file and line;
# a filter bound that would drop every record is refused with the valid range.
set -u
S=${SL_CLI:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
printf '1,2\n3,x\n5,6\n\nbad\n7,8\n' > "$T/d.csv"
spec() { # ON_ERROR PARALLELISM
  cat > "$T/s.json" <<J
{"name": "csv", "ops": [{"op": "files", "list": ["$T/d.csv"]}, {"op": "lines", "skip_empty": true},
 {"op": "map", "fn": "parse_csv", $1 "parallelism": $2, "args": {"columns": [{"name": "a", "dtype": "int64"},
  {"name": "b", "dtype": "int64"}]}}, {"op": "prefetch", "buffer": 2}]}
J
}
for par in 1 2; do
  spec '"on_error": "skip",' $par
  out=$("$S" run "$T/s.json" --quiet 2>&1) || fail "run with on_error skip (parallelism $par): $out"
  echo "$out" | grep -q "^csv: 3 elements" || fail "kept elements (parallelism $par): $out"
  echo "$out" | grep -q "skipped: ops\[2\] (map parse_csv) 2" || fail "skipped line (parallelism $par): $out"
  # and why, each reason with its count and first message (file and line)
  echo "$out" | grep -q "^    1 x ops\[2\]: element 1 ($T/d.csv, line 2): field 2 (column 'b')" \
    || fail "skip reasons (parallelism $par): $out"
  js=$("$S" run "$T/s.json" --json) || fail "run --json with on_error skip"
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["elements"]==3 and d["skipped"]=={"ops[2]": 2}, d' "$js" \
    || fail "--json skipped (parallelism $par): $js"
  # the default fails at the first bad line, naming the file and its line (line 2), not only the element
  spec '' $par
  out=$("$S" run "$T/s.json" --quiet 2>&1) && fail "a bad line passed without on_error"
  echo "$out" | grep -q "ops\[2\]: element 1 ($T/d.csv, line 2)" || fail "bad line not named (parallelism $par): $out"
done
# a clean run has an empty "skipped" object and no skipped line
echo '{"name": "ok", "ops": [{"op": "range", "stop": 10}]}' > "$T/ok.json"
js=$("$S" run "$T/ok.json" --json) || fail "clean run"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["skipped"]=={}, d' "$js" || fail "clean --json: $js"
"$S" run "$T/ok.json" | grep -q skipped && fail "clean run prints a skipped line"
# on_error takes "error" or "skip" only (the words of parse_csv and on_corrupt)
spec '"on_error": "error",' 1
"$S" validate "$T/s.json" >/dev/null 2>&1 || fail "on_error error refused"
spec '"on_error": "ignore",' 1
out=$("$S" validate "$T/s.json" 2>&1) && fail "on_error ignore accepted"
echo "$out" | grep -q 'ops\[2\].on_error' || fail "on_error message: $out"
# filter length with a negative or crossed bound would drop everything: refused with the valid range
for a in '"max": -1' '"min": -2' '"min": 5, "max": 2'; do
  echo "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"filter\", \"fn\": \"length\", \"args\": {\"component\": \"value\", $a}}]}" > "$T/f.json"
  out=$("$S" validate "$T/f.json" 2>&1) && fail "filter length $a accepted"
  echo "$out" | grep -q "ops\[1\].args.m.*valid: 0" || fail "filter length $a: $out"
done
echo "cli_skip: all checks passed"
