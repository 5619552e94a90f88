#!/usr/bin/env bash
# cli_digest.sh: `sluice run --digest`: the same multiset of elements gives the same digest whatever the order or the
# parallelism, digests of disjoint shards add up (modulo 2^64) to the whole's, and other data gives another digest.
set -u
S=${SL_CLI:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
digest() { # SPEC -> the 16 hex digits of --json's "digest"
  local js
  js=$("$S" run "$1" --digest --json --quiet) || fail "run $1: $js"
  echo "$js" | sed -n 's/.*"digest": "\([0-9a-f]\{16\}\)".*/\1/p'
}
spec() { # NAME OPS... -> writes $T/NAME.json
  local n=$1; shift
  local IFS=,
  echo "{\"name\": \"$n\", \"seed\": 3, \"ops\": [$*]}" > "$T/$n.json"
}
R='{"op": "range", "stop": 3000}'
MAP='{"op": "map", "fn": "spin", "args": {"us": 2}'
spec p1 "$R" "$MAP, \"parallelism\": 1}"
spec p4 "$R" "$MAP, \"parallelism\": 4, \"deterministic\": false}"
spec shuf "$R" '{"op": "shuffle", "buffer": 500}' "$MAP, \"parallelism\": 4, \"deterministic\": false}"
spec s0 "$R" '{"op": "shard", "num_shards": 2, "index": 0}' "$MAP, \"parallelism\": 2, \"deterministic\": false}"
spec s1 "$R" '{"op": "shard", "num_shards": 2, "index": 1}' "$MAP}"
spec less '{"op": "range", "stop": 2999}' "$MAP}"

d1=$(digest "$T/p1.json"); d4=$(digest "$T/p4.json"); ds=$(digest "$T/shuf.json")
[ ${#d1} -eq 16 ] || fail "no 16-digit digest: '$d1'"
[ "$d1" = "$d4" ] || fail "parallelism 1 vs 4 (deterministic false): $d1 vs $d4"
[ "$d1" = "$ds" ] || fail "shuffled vs in order: $d1 vs $ds"
d0=$(digest "$T/s0.json"); dd1=$(digest "$T/s1.json")
sum=$(printf '%016x' $(( 0x$d0 + 0x$dd1 ))) # bash arithmetic wraps modulo 2^64
[ "$sum" = "$d1" ] || fail "shards 0/2 + 1/2 = $d0 + $dd1 = $sum, whole $d1"
[ "$d0" != "$dd1" ] || fail "the two shards have the same digest"
dl=$(digest "$T/less.json")
[ "$dl" != "$d1" ] || fail "one element fewer, same digest"

# Batches: the same batches in the same order, whatever the parallelism of a deterministic map.
spec b1 "$R" "$MAP, \"parallelism\": 1}" '{"op": "batch", "size": 7}'
spec b4 "$R" "$MAP, \"parallelism\": 4}" '{"op": "batch", "size": 7}' '{"op": "prefetch", "buffer": 2}'
[ "$(digest "$T/b1.json")" = "$(digest "$T/b4.json")" ] || fail "batched pipelines differ"

# The optimizer's rewrite of a seeded pipeline (knobs only: no cache inserted) keeps its data.
spec opt '{"op": "range", "stop": 2000}' "$MAP, \"parallelism\": \"autotune\"}" '{"op": "shuffle", "buffer": 100}' \
  '{"op": "batch", "size": 8}' '{"op": "prefetch", "buffer": "autotune"}'
"$S" optimize "$T/opt.json" -o "$T/opt.tuned.json" --seconds 0.3 --measure 0 --no-cache > /dev/null 2>&1 || fail "optimize"
[ "$(digest "$T/opt.json")" = "$(digest "$T/opt.tuned.json")" ] || fail "the optimizer's rewrite changed the data"

# The text summary carries it too, and --take limits what it covers.
"$S" run "$T/p1.json" --digest --quiet | grep -q "digest $d1" || fail "text summary without the digest"
dt=$("$S" run "$T/p1.json" --digest --json --take 10 | sed -n 's/.*"digest": "\([0-9a-f]*\)".*/\1/p')
[ -n "$dt" ] && [ "$dt" != "$d1" ] || fail "--take 10 digest: '$dt'"
"$S" run "$T/p1.json" --json --quiet | grep -q '"digest"' && fail "digest printed without --digest"
echo "cli_digest: all checks passed"
