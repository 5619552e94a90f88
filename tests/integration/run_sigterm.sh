#!/usr/bin/env bash
# run_sigterm.sh: SIGTERM ends a `sluice run` whatever its threads are doing (issue 34 row 6): the CLI cancels the
# run (the engine's blocking points poll that flag), and if a thread sits in a function that does not return, it
# exits after its grace period with 143 instead of waiting for it. The stuck functions here sleep 10 s per element
# (the most `us` allows), twice the grace;
# the bound of 120 s only separates "stopped" from "waited for the function".
set -u
S=${SL_CLI:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-sigterm-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/signal_common.inc"
cd "$T"
# stopped NAME SPEC EXPECT: started, sent SIGTERM once it is running, ends with exit 143 and EXPECT on stderr.
stopped() {
  echo "$2" > "$1.json"
  timeout -s KILL 120 "$S" run "$1.json" --quiet > "$1.out" 2> "$1.err" &
  pid=$!
  # once sluice (timeout's child) has its handler and a second to reach the stuck function; timeout forwards SIGTERM
  child=$(child_of $pid) && sig_ready "$child" TERM "$S" || fail "$1: sluice never started: $(cat "$1.err")"
  sleep 1
  kill -TERM $pid 2> /dev/null
  wait $pid; rc=$?
  [ $rc -eq 143 ] || fail "$1: exit $rc (137: still running after 120 s): $(cat "$1.err")"
  grep -qF "$3" "$1.err" || fail "$1: no '$3' in: $(cat "$1.err")"
}
SLEEP='{"op": "map", "fn": "sleep_io", "args": {"us": 10000000}'
# Workers stuck in the function, the consumer waiting for them.
stopped workers "{\"ops\": [{\"op\": \"range\", \"stop\": 100}, $SLEEP, \"parallelism\": 2}]}" \
  "did not stop within 5 s"
# The consumer thread itself inside the function.
stopped sync "{\"ops\": [{\"op\": \"range\", \"stop\": 100}, $SLEEP}]}" "did not stop within 5 s"
# Workers of an interleave waiting on a consumer that waits on a slow map behind a prefetch: every blocking point
# polls the cancellation flag, so the run stops cleanly and prints its summary.
stopped blocked "{\"ops\": [{\"op\": \"range\", \"stop\": 1000000}, {\"op\": \"interleave\", \"parallelism\": 2,
  \"buffer\": 4, \"source\": [{\"op\": \"range\", \"stop\": 1000000}]}, {\"op\": \"prefetch\", \"buffer\": 8},
  {\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": {\"us\": 1000}}]}" "terminated after"
exit 0
