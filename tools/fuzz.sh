#!/usr/bin/env bash
# Runs each libFuzzer target in BUILD for SECONDS, starting from tests/fuzz/corpus/<target> (copied, so the repo is
# not written). A crash leaves its input in BUILD/fuzz-artifacts/ and fails the run: make it a regression test.
set -euo pipefail
build=${1:-build-fuzz}
secs=${2:-20}
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$build/fuzz-artifacts"
status=0
for bin in "$build"/fuzz_*; do
  [ -x "$bin" ] || continue
  case "$bin" in *_replay) continue ;; esac # the standalone replays of a test build
  name=$(basename "$bin")
  corpus="$build/fuzz-corpus/${name#fuzz_}"
  mkdir -p "$corpus"
  if [ -d "$top/tests/fuzz/corpus/${name#fuzz_}" ]; then cp -n "$top/tests/fuzz/corpus/${name#fuzz_}"/* "$corpus"/ 2>/dev/null || true; fi
  echo "fuzz: $name for ${secs}s"
  if ! ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$build/fuzz-artifacts/$name-" "$corpus" > "$build/$name.log" 2>&1; then
    echo "fuzz: $name FAILED (see $build/$name.log and $build/fuzz-artifacts/)"
    tail -30 "$build/$name.log"
    status=1
  else
    grep -E "^#[0-9]+.*(DONE|pulse)" "$build/$name.log" | tail -1 || true
  fi
done
exit $status
