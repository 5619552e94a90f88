#!/usr/bin/env bash
# cli_validate.sh: `sluice validate` as a new user meets it: typos in op knobs and function args named with their
# JSON path and the nearest valid name, components followed through the pipeline (a missing one, a padded_shapes key
# that is no component, a batch of ragged token lists), and `--print` showing the structure after each op.
set -u
S=${SL_CLI:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-validate-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$T"
"$S" gen text --out text --n 20 --shards 1 --vocab-size 50 --quiet > /dev/null || fail "gen text"

# expect_error NAME NEEDLE JSON: validate fails (exit 1) with NEEDLE in the message.
expect_error() {
  echo "$3" > "$1.json"
  out=$("$S" validate "$1.json" 2>&1); rc=$?
  [ $rc -eq 1 ] || fail "$1: exit $rc: $out"
  echo "$out" | grep -qF -- "$2" || fail "$1: no '$2' in: $out"
}
TXT='{"op": "files", "glob": "text/train-*.txt"}, {"op": "lines"}'
TOK='{"op": "map", "fn": "tokenize", "args": {"vocab": "text/vocab.txt"}}'
expect_error csv "ops[3].args.delimeter: unknown arg for function 'parse_csv'; did you mean 'delimiter'?" \
  "{\"ops\": [$TXT, {\"op\": \"shuffle\", \"buffer\": 4}, {\"op\": \"map\", \"fn\": \"parse_csv\", \"args\": {\"delimeter\": \";\", \"columns\": [{\"name\": \"a\", \"dtype\": \"bytes\"}]}}]}"
expect_error log1p "ops[1].args.clip_negatve: unknown arg for function 'log1p'; did you mean 'clip_negative'?" \
  '{"ops": [{"op": "range", "stop": 3}, {"op": "map", "fn": "log1p", "args": {"component": "value", "clip_negatve": true}}]}'
expect_error jpeg "ops[1].args.chanels: unknown arg for function 'decode_jpeg'; did you mean 'channels'?" \
  '{"ops": [{"op": "range", "stop": 3}, {"op": "map", "fn": "decode_jpeg", "args": {"chanels": 1}}]}'
expect_error tokns "ops[3] (padded_batch): padded_shapes.tokns: no component 'tokns' reaches this op; did you mean 'tokens'?" \
  "{\"ops\": [$TXT, $TOK, {\"op\": \"padded_batch\", \"size\": 4, \"padded_shapes\": {\"tokns\": [128]}}]}"
expect_error ragged "ops[3] (batch): component 'tokens' (made by ops[2]) has a dimension 0 that varies" \
  "{\"ops\": [$TXT, $TOK, {\"op\": \"batch\", \"size\": 4}]}"
expect_error missing "reads component 'label' (ops[3].args.component), which no earlier op makes (the element has: 'tokens')" \
  "{\"ops\": [$TXT, $TOK, {\"op\": \"map\", \"fn\": \"hash_bucket\", \"args\": {\"component\": \"label\", \"buckets\": 3}}]}"
# A batch of byte-string arrays is refused by validate as run refuses it (issue 34 row 16), batch and padded_batch.
CSV26='{"op": "map", "fn": "parse_csv", "args": {"delimiter": " ", "columns": [{"name": "cat", "dtype": "bytes", "count": 26}]}}'
expect_error bytes26 "ops[3] (batch): component 'cat' (made by ops[2]) is an array of byte strings: batching stacks" \
  "{\"ops\": [$TXT, $CSV26, {\"op\": \"batch\", \"size\": 4}]}"
expect_error bytes26p "ops[3] (padded_batch): component 'cat' (made by ops[2]) is an array of byte strings" \
  "{\"ops\": [$TXT, $CSV26, {\"op\": \"padded_batch\", \"size\": 4}]}"
expect_error range "ops[1].size: 0 is out of range (valid: 1..16777216)" \
  '{"ops": [{"op": "range", "stop": 3}, {"op": "batch", "size": 0}]}'
expect_error knob "ops[1].bufer: unknown knob for op 'prefetch'; did you mean 'buffer'?" \
  '{"ops": [{"op": "range", "stop": 3}, {"op": "prefetch", "bufer": 2}]}'

# --print: one line per op, with the structure after it; nested ops indented.
echo "{\"ops\": [{\"op\": \"files\", \"glob\": \"text/train-*.txt\"}, {\"op\": \"interleave\", \"source\": [{\"op\": \"lines\"}]},
  $TOK, {\"op\": \"padded_batch\", \"size\": 4, \"padded_shapes\": {\"tokens\": [64]}, \"drop_remainder\": true}]}" > ok.json
out=$("$S" validate ok.json --print) || fail "validate --print: $out"
[ "$(echo "$out" | wc -l)" -eq 5 ] || fail "--print: not one line per op: $out"
echo "$out" | grep -qE '^ops\[0\] +files +filename bytes \[\]$' || fail "--print files: $out"
echo "$out" | grep -qE '^  ops\[1\]\.source\[0\] +lines +line bytes \[\]$' || fail "--print nested: $out"
echo "$out" | grep -qE '^ops\[2\] +map tokenize +tokens int32 \[\*\]$' || fail "--print tokenize: $out"
echo "$out" | grep -qE '^ops\[3\] +padded_batch +tokens int32 \[4, 64\]$' || fail "--print padded_batch: $out"
out=$("$S" validate ok.json --print-spec) || fail "--print-spec"
echo "$out" | grep -q '"padded_batch"' || fail "--print-spec: $out"
"$S" validate ok.json | grep -q "ok (5 ops)" || fail "validate"
exit 0
