#!/usr/bin/env bash
# state_resume.sh: `sluice run --save-state` / `--resume` on the suite's five pipelines (parallel maps, interleave,
# shuffle, bucketing, prefetch), each cut at several points: the digest of the part before the cut plus that of the
# part after, run in a new process, equals the uninterrupted run's (digests of disjoint parts add); a state taken at
# parallelism 1 restores on the spec's own plan; Ctrl-C saves a state too; a wrong state is refused, nothing run.
set -u
S=${SL_CLI:?}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$T/data"
"$S" gen imagenet --out "$T/data/imagenet" --n 300 --shards 3 --quiet > /dev/null || fail "gen imagenet"
"$S" gen ssd --out "$T/data/ssd" --n 160 --shards 2 --quiet > /dev/null || fail "gen ssd"
"$S" gen text --out "$T/data/text" --n 600 --shards 3 --vocab-size 500 --quiet > /dev/null || fail "gen text"
"$S" gen tabular --out "$T/data/tabular" --n 9000 --shards 3 --quiet > /dev/null || fail "gen tabular"
cd "$T" || fail "cd"
for s in imagenet ssd transformer tabular imagenet-cacheable; do cp "$ROOT/examples/$s.json" "$T/"; done
dig() { awk '/digest/{print $2}'; }
add() { python3 -c "print('%016x' % ((int('$1',16) + int('$2',16)) % 2**64))"; }
for s in imagenet ssd transformer tabular imagenet-cacheable; do
  spec="$T/$s.json"
  full=$("$S" run "$spec" --digest --quiet | dig)
  n=$("$S" run "$spec" --json --quiet | python3 -c 'import json,sys; print(json.load(sys.stdin)["elements"])')
  [ -n "$full" ] && [ "$n" -gt 2 ] || fail "$s: no full run ($n elements)"
  for k in 1 $((n / 3)) $((n - 1)); do
    a=$("$S" run "$spec" --take "$k" --digest --quiet --save-state "$T/st" | dig) || fail "$s: cut at $k"
    b=$("$S" run "$spec" --resume "$T/st" --digest --quiet | dig) || fail "$s: resume at $k"
    [ "$(add "$a" "$b")" = "$full" ] || fail "$s: cut at $k of $n: $a + $b != $full"
  done
done
# --every: the last state wins; it resumes where the last multiple of N was.
spec="$T/imagenet.json"
full=$("$S" run "$spec" --digest --quiet | dig)
a=$("$S" run "$spec" --take 5 --digest --quiet --save-state "$T/ev" --every 2 | dig)
[ -s "$T/ev" ] || fail "--every wrote no state"
b=$("$S" run "$spec" --resume "$T/ev" --digest --quiet | dig)
[ "$(add "$a" "$b")" = "$full" ] || fail "--every: $a + $b != $full"
# A state of one pipeline given to another: refused, naming what differs, nothing run.
out=$("$S" run "$T/ssd.json" --resume "$T/ev" --quiet 2>&1) && fail "a foreign state was accepted"
echo "$out" | grep -q "another pipeline" || fail "foreign state message: $out"
head -c 40 "$T/ev" > "$T/short"
out=$("$S" run "$spec" --resume "$T/short" --quiet 2>&1) && fail "a truncated state was accepted"
echo "$out" | grep -qi "damaged\|truncated\|ends early" || fail "truncated state message: $out"
# Ctrl-C: the state is written at the stop, and the run goes on from it.
"$S" run "$T/transformer.json" --digest --quiet --save-state "$T/int" > "$T/int.out" 2>&1 &
pid=$!
sleep 0.3
kill -INT $pid 2>/dev/null
wait $pid
if [ -s "$T/int" ]; then
  a=$(dig < "$T/int.out")
  b=$("$S" run "$T/transformer.json" --resume "$T/int" --digest --quiet | dig)
  full=$("$S" run "$T/transformer.json" --digest --quiet | dig)
  [ "$(add "$a" "$b")" = "$full" ] || fail "after Ctrl-C: $a + $b != $full"
fi
echo "ok"
