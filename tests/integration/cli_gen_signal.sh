#!/usr/bin/env bash
# cli_gen_signal.sh: Ctrl-C or SIGTERM during `sluice gen` (issue 20): a one-line message, exit 130/143, every file
# under a final name complete (shards are written as .NAME.tmp-PID and renamed), no temporary file left, and a rerun
# into the same folder succeeds.
set -u
S=${SL_CLI:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# every tfrecord shard under DIR reads to its end with both CRCs checked, holding N records in all
check_shards() { # DIR N
  printf '{"name": "chk", "ops": [{"op": "files", "glob": "%s/train-*.tfrecord"}, {"op": "tfrecord"}]}' "$1" > "$T/chk.json"
  local out
  out=$("$S" run "$T/chk.json" --quiet 2>&1) || fail "shards under final names do not read: $out"
  if [ -n "${2:-}" ]; then echo "$out" | grep -q "^chk: $2 elements" || fail "wanted $2 records: $out"; fi
}

for sig in INT TERM; do
  want=$([ $sig = INT ] && echo 130 || echo 143)
  d="$T/g-$sig"
  "$S" gen imagenet --out "$d" --n 3000 --shards 300 --threads 1 --quality 50 --quiet > "$T/out" 2> "$T/err" &
  pid=$!
  # wait (without a clock limit the machine's load could break) until a first shard is complete
  for _ in $(seq 1 1200); do
    ls "$d"/train-*.tfrecord > /dev/null 2>&1 && break
    kill -0 $pid 2> /dev/null || break
    sleep 0.1
  done
  kill -$sig $pid
  wait $pid; rc=$?
  [ $rc -eq $want ] || fail "gen after SIG$sig exited $rc, wanted $want: $(cat "$T/err")"
  [ "$(wc -l < "$T/err")" -eq 1 ] || fail "not one line after SIG$sig: $(cat "$T/err")"
  grep -q "^sluice gen: $([ $sig = INT ] && echo interrupted || echo terminated); cancelled after [0-9]* records" "$T/err" \
    || fail "message after SIG$sig: $(cat "$T/err")"
  ls -A "$d" | grep -q tmp && fail "a temporary file left after SIG$sig: $(ls -A "$d")"
  n=$(ls "$d"/train-*.tfrecord | wc -l)
  [ "$n" -ge 1 ] && [ "$n" -lt 300 ] || fail "after SIG$sig: $n shards"
  check_shards "$d" $((n * 10))
done

# a rerun into the interrupted folder succeeds and replaces what was there
"$S" gen imagenet --out "$T/g-INT" --n 300 --shards 300 --threads 2 --quality 50 --quiet > /dev/null || fail "rerun"
[ "$(ls "$T/g-INT"/train-*.tfrecord | wc -l)" -eq 300 ] || fail "rerun: $(ls "$T/g-INT" | wc -l) files"
check_shards "$T/g-INT" 300
ls -A "$T/g-INT" | grep -q tmp && fail "the rerun left a temporary file"

# a text dataset's vocabulary and shards take their final names only when complete
"$S" gen text --out "$T/t" --n 50 --shards 2 --vocab-size 100 --quiet > /dev/null || fail "gen text"
[ "$(ls -A "$T/t" | sort | tr '\n' ' ')" = "train-00000-of-00002.txt train-00001-of-00002.txt vocab.txt " ] \
  || fail "gen text wrote: $(ls -A "$T/t")"
echo "cli_gen_signal: all checks passed"
