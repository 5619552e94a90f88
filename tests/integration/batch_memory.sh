#!/usr/bin/env bash
# batch_memory.sh: a batch's memory is its output's, not `size` held elements (issue 34 row 7): a batch of
# 8,388,608 int64 (a 64 MB tensor) once took 16.9 GB, 2 KB per element slot; under a 2 GB address-space limit it
# runs and yields one 64 MB tensor; a size far larger than the stream costs nothing up front.
set -u
S=${SL_CLI:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-batchmem-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$T"
N=8388608
echo "{\"ops\": [{\"op\": \"range\", \"stop\": $N}, {\"op\": \"batch\", \"size\": $N}]}" > big.json
# Sanitizer builds reserve terabytes of shadow address space: the limit applies to the plain build only.
LIMIT=""
[ -z "${SL_SANITIZE:-}" ] && LIMIT="ulimit -v 2000000;"
out=$(bash -c "$LIMIT \"$S\" run big.json --quiet --json" 2>&1) || fail "a batch of $N int64 under 2 GB: $out"
echo "$out" | grep -q '"examples": 8388608' || fail "big batch: $out"
echo "$out" | grep -q '"bytes": 67108864' || fail "big batch: not one 64 MB tensor: $out"
# A size far larger than the stream costs nothing up front.
echo '{"ops": [{"op": "range", "stop": 3}, {"op": "batch", "size": 16777216}]}' > short.json
out=$(bash -c "$LIMIT \"$S\" head short.json" 2>&1) || fail "short stream, huge size: $out"
echo "$out" | grep -qE "value +int64 +\[3\] +0 1 2$" || fail "short stream: $out"
exit 0
