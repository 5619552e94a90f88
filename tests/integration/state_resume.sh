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
. "$(dirname "$0")/signal_common.inc"
mkdir -p "$T/data"
"$S" gen imagenet --out "$T/data/imagenet" --n 300 --shards 3 --quiet > /dev/null || fail "gen imagenet"
"$S" gen ssd --out "$T/data/ssd" --n 160 --shards 2 --quiet > /dev/null || fail "gen ssd"
"$S" gen text --out "$T/data/text" --n 600 --shards 3 --vocab-size 500 --quiet > /dev/null || fail "gen text"
"$S" gen tabular --out "$T/data/tabular" --n 9000 --shards 3 --quiet > /dev/null || fail "gen tabular"
cd "$T" || fail "cd"
for s in imagenet ssd transformer tabular imagenet-cacheable; do cp "$ROOT/examples/$s.json" "$T/"; done
dig() { awk '/digest/{print $2}'; }
add() { python3 -c "print('%016x' % ((int('$1',16) + int('$2',16)) % 2**64))"; }
# cuts NAME: the spec $T/NAME.json cut after 1, a third and all but one of its elements, each resumed in a new process:
# the two parts' digests add up to the whole run's.
cuts() {
  local s=$1 spec="$T/$1.json" full n k a b
  full=$("$S" run "$spec" --digest --quiet | dig) || fail "$s: full run"
  n=$("$S" run "$spec" --json --quiet | python3 -c 'import json,sys; print(json.load(sys.stdin)["elements"])')
  [ -n "$full" ] && [ "$n" -gt 2 ] || fail "$s: no full run ($n elements)"
  for k in 1 $((n / 3)) $((n - 1)); do
    a=$("$S" run "$spec" --take "$k" --digest --quiet --save-state "$T/st" | dig) || fail "$s: cut at $k"
    b=$("$S" run "$spec" --resume "$T/st" --digest --quiet | dig) || fail "$s: resume at $k"
    [ "$(add "$a" "$b")" = "$full" ] || fail "$s: cut at $k of $n: $a + $b != $full"
  done
}
for s in imagenet ssd transformer tabular imagenet-cacheable; do cuts "$s"; done
# The other readers: an image folder (shuffled per epoch) and WebDataset tar shards through an interleave, with a
# padded batch; each cut at several points.
"$S" gen imagenet --format folder --classes 4 --out "$T/data/folder" --n 40 --quiet > /dev/null || fail "gen folder"
"$S" gen imagenet --format tar --classes 4 --out "$T/data/tar" --n 40 --shards 3 --quiet > /dev/null || fail "gen tar"
cat > "$T/folder.json" <<J
{"name": "folder", "seed": 3, "ops": [{"op": "image_folder", "root": "data/folder", "shuffle": true},
 {"op": "shuffle", "buffer": 8},
 {"op": "map", "fn": "decode_image", "parallelism": 2, "args": {"component": "image/encoded"}},
 {"op": "map", "fn": "random_resized_crop", "args": {"size": [16, 16]}},
 {"op": "batch", "size": 3}, {"op": "prefetch", "buffer": 2}]}
J
cat > "$T/tar.json" <<J
{"name": "tar", "seed": 4, "ops": [{"op": "files", "glob": "data/tar/*.tar", "shuffle": true},
 {"op": "interleave", "cycle_length": 2, "parallelism": 2, "source": [{"op": "tar"}]},
 {"op": "shuffle", "buffer": 6}, {"op": "map", "fn": "parse_int", "args": {"component": "cls"}},
 {"op": "padded_batch", "size": 4}, {"op": "prefetch", "buffer": 2}]}
J
for s in folder tar; do cuts "$s"; done
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
# Ctrl-C: the state is written at the stop, and the run goes on from it. The pipeline takes about 2 s (the suite's
# five end in milliseconds, before any signal could come), shuffled so that the state holds a buffer.
echo '{"name": "slowshuf", "ops": [{"op": "range", "stop": 2000}, {"op": "shuffle", "buffer": 64, "seed": 3},
  {"op": "map", "fn": "sleep_io", "args": {"us": 2000}, "parallelism": 2}]}' > "$T/slowshuf.json"
"$S" run "$T/slowshuf.json" --digest --quiet --save-state "$T/int" > "$T/int.out" 2> "$T/int.err" &
pid=$!
sig_ready $pid INT "$S" || fail "run --save-state never became ready for SIGINT: $(cat "$T/int.err")"
sleep 0.2
kill -INT $pid
wait $pid; rc=$?
[ $rc -eq 130 ] || fail "run --save-state after SIGINT exited $rc: $(cat "$T/int.err")"
[ -s "$T/int" ] || fail "no state written at Ctrl-C: $(cat "$T/int.err")"
a=$(dig < "$T/int.out")
b=$("$S" run "$T/slowshuf.json" --resume "$T/int" --digest --quiet | dig)
full=$("$S" run "$T/slowshuf.json" --digest --quiet | dig)
[ -n "$a" ] && [ "$(add "$a" "$b")" = "$full" ] || fail "after Ctrl-C: $a + $b != $full"
echo "ok"
