#!/usr/bin/env bash
# cli_head.sh: `sluice head` on every example spec over small generated data, its text and JSON forms, byte
# strings abbreviated, -n, and its usage errors.
set -u
: "${SL_CLI:?}" "${SL_SRC:?}"
S=$SL_CLI
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-head-it-XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }

# Small datasets under data/, where the examples look (sizes as in fns_pipelines.sh: each yields a full batch).
"$S" gen imagenet --out data/imagenet --n 70 --shards 2 --threads 2 --quiet > /dev/null || fail "gen imagenet"
"$S" gen ssd --out data/ssd --n 40 --shards 2 --quiet > /dev/null || fail "gen ssd"
"$S" gen text --out data/text --n 600 --shards 2 --vocab-size 2000 --quiet > /dev/null || fail "gen text"
"$S" gen tabular --out data/tabular --n 2100 --shards 2 --quiet > /dev/null || fail "gen tabular"
"$S" gen imagenet --format folder --out data/folder --n 64 --classes 10 --threads 2 --quiet > /dev/null || fail "gen folder"
"$S" gen imagenet --format tar --out data/wds --n 64 --shards 2 --classes 10 --threads 2 --quiet > /dev/null || fail "gen tar"

n=0
for f in "$SL_SRC"/examples/*.json; do
  out=$("$S" head "$f" -n 2) || fail "head $f: $out"
  echo "$out" | grep -q "^element 0$" || fail "head $f: no element 0: $out"
  echo "$out" | grep -Eq '^  [^ ]+ +(uint8|int32|int64|float32|float64|bytes) +\[' || fail "head $f: no component line: $out"
  js=$("$S" head "$f" -n 1 --json) || fail "head --json $f: $js"
  python3 - "$js" <<'P' || fail "head --json $f: $js"
import json, sys
d = json.loads(sys.argv[1])
assert d["status"] == "ok" and len(d["elements"]) == 1, d
for c in d["elements"][0]["components"]:
    assert {"name", "dtype", "shape", "count", "values"} <= set(c), c
    assert 0 < len(c["values"]) <= 8, c
P
  n=$((n + 1))
done
[ $n -ge 6 ] || fail "only $n example specs found"

# Byte strings before decoding: abbreviated, escaped, with their length.
cat > raw.json <<'J'
{"name": "raw", "ops": [{"op": "files", "glob": "data/imagenet/train-*.tfrecord"}, {"op": "interleave",
 "cycle_length": 1, "source": [{"op": "tfrecord"}]}, {"op": "map", "fn": "parse_example", "args": {"features":
 {"image/encoded": {"dtype": "bytes"}, "image/class/label": {"dtype": "int64"}}}}]}
J
out=$("$S" head raw.json -n 3) || fail "head raw: $out"
[ "$(echo "$out" | grep -c '^element ')" -eq 3 ] || fail "-n 3: $out"
echo "$out" | grep -q 'image/encoded  *bytes  *\[\]  *"\\xff\\xd8\\xff.*\.\.\." ([0-9]* bytes)' || fail "jpeg bytes: $out"
js=$("$S" head raw.json -n 1 --json)
python3 - "$js" <<'P' || fail "raw --json: $js"
import json, sys
c = {c["name"]: c for c in json.loads(sys.argv[1])["elements"][0]["components"]}
e = c["image/encoded"]
assert e["dtype"] == "bytes" and e["shape"] == [] and e["bytes"] > 100, e
assert e["values"][0].startswith("\\xff\\xd8") and e["values"][0].endswith("..."), e
assert isinstance(c["image/class/label"]["values"][0], int)
P

# A stream shorter than -n says so; the default is 5.
echo '{"ops": [{"op": "range", "stop": 3}]}' > three.json
out=$("$S" head three.json)
echo "$out" | grep -q "ended after 3 elements" || fail "short stream: $out"
echo '{"ops": [{"op": "range"}]}' > inf.json
[ "$("$S" head inf.json | grep -c '^element ')" -eq 5 ] || fail "default -n"
"$S" head inf.json -n 2 | grep -q "value int64    \[\]  *1$" || fail "scalar value: $("$S" head inf.json -n 2)"

# Errors: usage (2), a failing pipeline (1, and the JSON error document).
"$S" head 2>/dev/null; [ $? -eq 2 ] || fail "head without SPEC"
"$S" head inf.json -n 0 2>/dev/null; [ $? -eq 2 ] || fail "-n 0"
err=$("$S" head inf.json -n 2>&1); [ $? -eq 2 ] || fail "-n without a value"
echo "$err" | grep -q -- "-n needs a value" || fail "-n message: $err"
"$S" head inf.json --bogus 2>/dev/null; [ $? -eq 2 ] || fail "unknown option"
echo '{"ops": [{"op": "range", "stop": 3}, {"op": "map", "fn": "decode_jpeg", "args": {"component": "value"}}]}' > bad.json
js=$("$S" head bad.json --json 2>/dev/null); [ $? -eq 1 ] || fail "failing pipeline exit code"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["status"]=="error" and d["error"], d' "$js" \
  || fail "failing pipeline --json: $js"
"$S" head --help | grep -q "usage: sluice head" || fail "head --help"
echo "cli_head: all checks passed"
