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
