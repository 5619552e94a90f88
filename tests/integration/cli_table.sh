#!/usr/bin/env bash
# cli_table.sh: the engine commands (run, validate, head, trace, optimize, analyze, report) as a new user tries them,
# one block per row of issue 20's table: option values checked, --version everywhere, errors that name what was
# wrong once, --json errors on stdout, outputs checked before long runs, and a line said on Ctrl-C / SIGTERM.
set -u
S=${SL_CLI:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/signal_common.inc"
# expect RC CMD...: runs CMD, stdout+stderr in $out, and checks the exit code
expect() {
  local want=$1; shift
  out=$("$@" 2>&1); local rc=$?
  [ $rc -eq "$want" ] || fail "'$*' exited $rc, wanted $want: $out"
}
echo '{"name": "ok", "ops": [{"op": "range", "stop": 100}]}' > "$T/ok.json"
echo '{"name": "slow", "ops": [{"op": "range"}, {"op": "map", "fn": "sleep_io", "args": {"us": 2000}, "parallelism": 2}]}' > "$T/slow.json"

# run --seconds -1 / 0, --take -5, --take with no value: usage errors naming the option
for args in "--seconds -1" "--seconds 0" "--seconds nan" "--take -5" "--take 0" "--take" "--seconds" "--warmup -1"; do
  # shellcheck disable=SC2086
  expect 2 "$S" run "$T/ok.json" $args
  opt=${args%% *}
  echo "$out" | grep -q -- "$opt" || fail "run $args: message does not name $opt: $out"
done
expect 2 "$S" trace "$T/ok.json" --take
echo "$out" | grep -q -- "--take needs a value" || fail "trace --take: $out"
expect 2 "$S" optimize "$T/ok.json" --measure -1
echo "$out" | grep -q -- "--measure" || fail "optimize --measure -1: $out"

# validate SPEC --foo: a usage error; SUBCOMMAND --version: the version
expect 2 "$S" validate "$T/ok.json" --foo
echo "$out" | grep -q -- "unknown option '--foo'" || fail "validate --foo: $out"
expect 2 "$S" validate "$T/ok.json" "$T/ok.json"
expect 0 "$S" validate "$T/ok.json" --print
echo "$out" | grep -q 'ops\[0\] *range' || fail "validate --print: $out"
ver=$("$S" --version)
cmds="run validate head trace optimize analyze report gen"
"$S" --help 2>&1 | grep -q "^  prov " && cmds="$cmds prov" # absent in an SL_WITH_PROV=OFF build
for c in $cmds; do
  expect 0 "$S" $c --version
  [ "$out" = "$ver" ] || fail "$c --version: '$out', wanted '$ver'"
done
expect 0 "$S" run "$T/ok.json" --version
[ "$out" = "$ver" ] || fail "run SPEC --version: $out"

# a directory or a YAML file as SPEC
mkdir "$T/specs"
expect 1 "$S" run "$T/specs"
echo "$out" | grep -q "is a directory" || fail "directory as SPEC: $out"
printf 'name: x\nops:\n  - op: range\n' > "$T/p.yaml"
for c in run validate head trace; do
  expect 1 "$S" $c "$T/p.yaml"
  echo "$out" | grep -q "specs are JSON" || fail "$c YAML: $out"
done
cp "$T/p.yaml" "$T/p.txt"
expect 1 "$S" validate "$T/p.txt"
echo "$out" | grep -q "specs are JSON" || fail "YAML without its suffix: $out"

# repeated paths in messages: each path once
for cmd in "run $T/none.json" "validate $T/none.json" "trace $T/none.json" "optimize $T/none.json" \
           "analyze $T/none.json" "report $T/none.json" "head $T/none.json"; do
  # shellcheck disable=SC2086
  expect 1 "$S" $cmd
  [ "$(echo "$out" | grep -o "$T/none.json" | wc -l)" -eq 1 ] || fail "'$cmd' names the path more than once: $out"
done
"$S" trace "$T/ok.json" -o "$T/t.json" --quiet || fail "trace"
expect 1 "$S" report "$T/t.json" --tuned "$T/none.json"
[ "$(echo "$out" | grep -o "$T/none.json" | wc -l)" -eq 1 ] || fail "report --tuned: $out"

# trace -o / optimize -o to an unwritable path: fails before running (the spec would run for a minute)
for o in "$T/no/such/dir/t.json" "$T/specs"; do
  expect 1 timeout 20 "$S" trace "$T/slow.json" --seconds 60 -o "$o"
  echo "$out" | grep -q "$o" || fail "trace -o $o: $out"
  expect 1 timeout 20 "$S" optimize "$T/slow.json" --seconds 60 -o "$o"
  echo "$out" | grep -q "$o" || fail "optimize -o $o: $out"
done
[ ! -e "$T/no" ] || fail "the probe left something behind"
"$S" trace "$T/ok.json" -o "$T/new.json" --quiet && [ -s "$T/new.json" ] || fail "trace -o to a new file"

# --json when the command fails: {"status": "error", "error": "<the message>"} on stdout
isjerr() { # JSON-TEXT NEEDLE
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["status"]=="error" and sys.argv[2] in d["error"], d' \
    "$1" "$2" || fail "not an error document naming '$2': $1"
}
js=$("$S" run "$T/none.json" --json 2>/dev/null); isjerr "$js" "none.json"
js=$("$S" run "$T/specs" --json 2>/dev/null); isjerr "$js" "is a directory"
echo '{"ops": [{"op": "files", "list": ["'"$T"'/ok.json"]}, {"op": "map", "fn": "decode_jpeg", "args": {"component": "filename"}}]}' > "$T/bad.json"
js=$("$S" run "$T/bad.json" --json 2>/dev/null); [ $? -eq 1 ] || fail "failing run exit code"
isjerr "$js" "ops[1]"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert "elements" in d' "$js" || fail "failing run: no counts"
js=$("$S" optimize "$T/none.json" --json 2>/dev/null); isjerr "$js" "none.json"
js=$("$S" analyze "$T/none.json" --json 2>/dev/null); isjerr "$js" "none.json"

# optimize --json without -o: the JSON on stdout and no spec; with -o the spec in the file
echo '{"name": "spin", "ops": [{"op": "range"}, {"op": "map", "fn": "spin", "args": {"us": 20}, "parallelism": 1}]}' > "$T/spin.json"
"$S" optimize "$T/spin.json" --trace "$T/t.json" --measure 0 --json > "$T/o.out" 2> "$T/o.err" && fail "a trace of another spec accepted"
"$S" trace "$T/spin.json" -o "$T/ts.json" --seconds 60 --take 64 --quiet || fail "trace spin"
"$S" optimize "$T/spin.json" --trace "$T/ts.json" --measure 0 --json > "$T/o.out" 2> "$T/o.err" || fail "optimize --json: $(cat "$T/o.err")"
python3 - "$T/o.out" <<'P' || fail "optimize --json stdout: $(cat "$T/o.out")"
import json, sys
lines = open(sys.argv[1]).read().strip().splitlines()
assert len(lines) == 1, lines
d = json.loads(lines[0])
assert d["status"] == "ok" and d["tuned"] is None and "predicted" in d and "ops" not in d, d
P
"$S" optimize "$T/spin.json" --trace "$T/ts.json" --measure 0 --json -o "$T/tuned.json" > "$T/o2.out" || fail "optimize -o"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["tuned"]==sys.argv[2], d' "$T/o2.out" "$T/tuned.json" \
  || fail "optimize --json -o: $(cat "$T/o2.out")"
"$S" validate "$T/tuned.json" > /dev/null || fail "tuned spec"

# Ctrl-C during trace and optimize, SIGTERM during run: one line, exit 130 / 143, nothing written
signal_check() { # SIGNAL RC PATTERN CMD...
  local sig=$1 want=$2 pat=$3; shift 3
  "$@" > "$T/sig.out" 2> "$T/sig.err" &
  local pid=$!
  sig_ready $pid "$sig" "$1" || fail "$* never became ready for SIG$sig: $(cat "$T/sig.err" 2> /dev/null)"
  kill -"$sig" $pid
  wait $pid; local rc=$?
  [ $rc -eq "$want" ] || fail "$* after SIG$sig exited $rc, wanted $want: $(cat "$T/sig.err")"
  grep -q "$pat" "$T/sig.err" || fail "$* after SIG$sig: '$pat' not said: $(cat "$T/sig.err")"
}
signal_check INT 130 "^sluice trace: interrupted; no trace written$" "$S" trace "$T/slow.json" --seconds 30 -o "$T/int.json"
[ ! -e "$T/int.json" ] || fail "an interrupted trace wrote its file"
signal_check TERM 143 "^sluice trace: terminated" "$S" trace "$T/slow.json" --seconds 30
signal_check INT 130 "^sluice optimize: interrupted; no spec written$" "$S" optimize "$T/slow.json" --seconds 30 -o "$T/int2.json"
[ ! -e "$T/int2.json" ] || fail "an interrupted optimize wrote its spec"
signal_check TERM 143 "terminated after [0-9]* elements" "$S" run "$T/slow.json" --quiet
grep -q "elements" "$T/sig.out" || fail "no summary after SIGTERM"
signal_check TERM 143 'terminated after' "$S" run "$T/slow.json" --json
grep -q '"status": "terminated"' "$T/sig.out" || fail "run --json after SIGTERM: $(cat "$T/sig.out")"
# The one option parser (src/cli/cli_opt.c): --opt=value as --opt value, the last of a repeated option, `--`
# ending the options, integers refused (not wrapped) beyond their range, each refusal naming the command, the option
# and the value.
says() { echo "$out" | grep -qF -- "$1" || fail "'$1' not said: $out"; }
# --take=N is --take N; the last --take wins
expect 0 "$S" run "$T/ok.json" --take=7 --json
says '"elements": 7,'
expect 0 "$S" run "$T/ok.json" --take 3 --take 5 --json
says '"elements": 5,'
expect 0 "$S" head "$T/ok.json" -n 2 --take=3 --json
[ "$(echo "$out" | grep -o '"components"' | wc -l)" -eq 3 ] || fail "head --take=3: $out"

# malformed, out of range, beyond int64: a usage error naming the command, the option and the value
expect 2 "$S" run "$T/ok.json" --seconds x
says "sluice run: --seconds: not a number: 'x'"
expect 2 "$S" run "$T/ok.json" --take=-1
says "sluice run: --take must be a positive number of elements, not -1"
expect 2 "$S" run "$T/ok.json" --take 99999999999999999999
says "--take must be a positive number of elements, not 99999999999999999999"
expect 2 "$S" head "$T/ok.json" -n 1.5
says "sluice head: -n: not an integer: '1.5'"
expect 2 "$S" gen imagenet --out "$T/g" --shards 4294967297
says "--shards must be in 1..100000, not 4294967297"
expect 2 "$S" run "$T/ok.json" --json=yes
says "--json takes no value"
expect 2 "$S" run "$T/ok.json" --frobnicate=3
says "unknown option '--frobnicate'"
expect 2 "$S" analyze "$T/none.json" --memory 12Q
says "--memory: not a size"

# `--`: what follows is positional, even when it starts with a dash
expect 1 "$S" validate -- -x.json
says "-x.json"
expect 2 "$S" validate "$T/ok.json" -- --print
says "more than one spec given"

if "$S" --help | grep -q "^  prov "; then
  # --depth is an int: 2^31 is refused, not wrapped to a negative depth
  expect 2 "$S" prov lineage "$T/db" 1 --depth 2147483648
  says "sluice prov lineage: --depth must be"
  says "not 2147483648"
  # --limit counts nodes (0: all): a negative one is refused
  expect 2 "$S" prov ls "$T/db" --limit -1
  says "sluice prov ls: --limit must be 0 (all) or more, not -1"
  # an option another analytics subcommand takes is unknown here
  expect 2 "$S" prov train "$T/db" -o "$T/m.json" --seeds 3
  says "unknown option '--seeds'"
  expect 2 "$S" prov gen "$T/db" --days=4294967297
  says "--days must be a positive int, not 4294967297"
fi
echo "cli_table: all checks passed"
