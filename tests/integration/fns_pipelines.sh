#!/usr/bin/env bash
# fns_pipelines.sh: `sluice gen` for the four datasets at a small size, then every suite pipeline of
# bench/pipelines/ and examples/ through `sluice run`, as a user would; plus the CLI's usage errors.
set -euo pipefail
: "${SL_CLI:?}" "${SL_SRC:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-fns-it-XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T"
mkdir -p bench
cp -r "$SL_SRC/bench/pipelines" bench/
cp -r "$SL_SRC/examples" .
fail() { echo "FAIL: $*" >&2; exit 1; }

"$SL_CLI" gen imagenet --out bench/data/imagenet --n 70 --shards 2 --threads 2 --quiet > gen.out
grep -q "mean image" gen.out || fail "gen imagenet summary: $(cat gen.out)"
grep -q "decode cost" gen.out || fail "gen imagenet decode cost"
"$SL_CLI" gen ssd --out bench/data/ssd --n 40 --shards 2 --quiet > /dev/null
"$SL_CLI" gen text --out bench/data/text --n 600 --shards 2 --vocab-size 2000 --quiet > /dev/null
"$SL_CLI" gen tabular --out bench/data/tabular --n 2100 --shards 2 --quiet > /dev/null
test -s bench/data/text/vocab.txt || fail "no vocabulary"
ln -s bench/data data

for p in imagenet ssd transformer tabular imagenet-cacheable; do
  for dir in bench/pipelines examples; do
    out=$("$SL_CLI" run "$dir/$p.json" --quiet --json) || fail "$dir/$p.json: $out"
    echo "$out" | grep -q '"elements"' || fail "$dir/$p.json: no summary: $out"
  done
done

out=$("$SL_CLI" run examples/imagenet-fused.json --quiet --json) || fail "examples/imagenet-fused.json: $out"

# optimize of a spec that fusion applies to (a 32x32 crop: decoded at 1/8 scale): the speed-up is over the spec as
# written, and its parts (fusion, knobs) are each measured; the phases are said on stderr unless --quiet.
cat > crop.json <<'J'
{"seed": 3, "ops": [{"op": "files", "glob": "bench/data/imagenet/train-*"},
  {"op": "interleave", "cycle_length": 2, "source": [{"op": "tfrecord"}]}, {"op": "repeat"},
  {"op": "map", "fn": "parse_example", "args": {"features": {"image/encoded": {"dtype": "bytes"}}}},
  {"op": "map", "fn": "decode_jpeg", "args": {"component": "image/encoded", "channels": 3}},
  {"op": "map", "fn": "random_resized_crop", "args": {"size": [32, 32]}}, {"op": "batch", "size": 8}]}
J
"$SL_CLI" optimize crop.json -o crop.tuned.json --seconds 0.5 --measure 0.6 --json > opt.json 2> opt.err \
  || fail "optimize crop.json: $(cat opt.err)"
python3 - opt.json <<'P' || fail "optimize crop.json --json: $(cat opt.json)"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["baseline_is"] == "the spec as written", r
if r["fused"]:  # fusion kept (it pays here, but a loaded machine's short trace may say otherwise)
    assert r["fused_baseline"] > 0 and r["baseline"] > 0, r
    assert abs(r["speedup_fusion"] - r["fused_baseline"] / r["baseline"]) < 1e-3 * r["speedup_fusion"], r
    assert abs(r["speedup_fusion"] * r["speedup_knobs"] - r["speedup"]) < 1e-3 * r["speedup"], r
else:
    assert r["fused_baseline"] == 0 and r["speedup_fusion"] == 1, r
P
grep -q "^optimize: final check" opt.err || fail "optimize: no phases on stderr: $(cat opt.err)"
if grep -q '"fused": true' opt.json; then
  grep -q "round 3/3: input as written" opt.err || fail "optimize: the written input not in the final check: $(cat opt.err)"
fi
"$SL_CLI" optimize crop.json -o crop.tuned.json --seconds 0.3 --measure 0 --quiet 2> opt.err > /dev/null || fail "optimize --quiet"
if grep -q "^optimize:" opt.err; then fail "optimize --quiet said its phases: $(cat opt.err)"; fi

# Usage errors exit 2; a bad output folder fails with 1.
set +e
"$SL_CLI" gen > /dev/null 2>&1; [ $? -eq 2 ] || fail "gen without a dataset should exit 2"
"$SL_CLI" gen mnist --out x > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown dataset should exit 2"
"$SL_CLI" gen text > /dev/null 2>&1; [ $? -eq 2 ] || fail "missing --out should exit 2"
"$SL_CLI" gen text --out x --n nope > /dev/null 2>&1; [ $? -eq 2 ] || fail "bad --n should exit 2"
"$SL_CLI" gen text --out /proc/nope --n 3 > /dev/null 2>&1; [ $? -eq 1 ] || fail "unwritable out should exit 1"
"$SL_CLI" gen --help | grep -q "imagenet" || fail "gen --help"
set -e
echo "ok"
