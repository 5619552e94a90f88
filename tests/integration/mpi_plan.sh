#!/usr/bin/env bash
# mpi_plan.sh: `sluice optimize SPEC --workers K` plans the offload cut from a trace: on a slow link it cuts where
# the fewest bytes per element cross it (the file list, before the lines are read and parsed); with a fast one the
# workers do everything; it writes a spec with one offload at the cut that runs under mpirun with the same
# elements; its prediction and the measured rate are printed (not asserted: timings on a loaded machine).
set -u
. "$(dirname "$0")/mpi_common.inc"
"$S" run --help | grep -q -- '--workers' || { echo "SKIP: sluice built without MPI (SL_WITH_MPI=OFF)"; exit 77; }
for i in $(seq 1 2000); do echo "$i,$((i * 3))"; done > "$T/a.csv"
cat > "$T/csv.json" <<JSON
{"name": "csv", "ops": [{"op": "files", "list": ["$T/a.csv"]}, {"op": "interleave", "source": [{"op": "lines"}]},
  {"op": "offload"},
  {"op": "map", "fn": "parse_csv", "args": {"columns": [{"name": "v", "dtype": "float64", "count": 2}]}},
  {"op": "map", "fn": "spin", "args": {"us": 50}}]}
JSON
plan() { "$S" optimize "$T/csv.json" --workers 2 --trainer-cores 0.01 --seconds 60 --json "$@"; }
# A weak trainer and a fast link: everything goes to the workers (the offload moves to the end, ops[4]).
js=$(plan --link-gbps 1000000 -o "$T/cut.json") || fail "optimize --workers: $js"
echo "$js"
[ "$(echo "$js" | field cut)" = 4 ] || fail "a fast link: the cut is not at the end: $js"
# A weak trainer and a slow link: the fewest bytes cross it: the file list, before the lines are read (ops[1]).
# (Cutting there saves only the file listing's CPU, which may sample as 0: then no cut, 0 bytes, is as good.)
js=$(plan --link-gbps 0.000001 -o "$T/slow.json") || fail "optimize --workers: $js"
echo "$js"
case $(echo "$js" | field cut) in 0|1) ;; *) fail "a slow link: the cut ships lines or rows: $js";; esac
awk -v b="$(echo "$js" | field bytes_per_element)" 'BEGIN { exit !(b < 1) }' || fail "a slow link: $js"
[ "$(grep -c '"offload"' "$T/cut.json")" = 1 ] || fail "the planned spec does not hold exactly one offload"
"$S" validate "$T/cut.json" >/dev/null || fail "the planned spec does not build"
one=$("$S" run "$T/cut.json" --json --digest --quiet) || fail "the planned spec, one process: $one"
out=$("${MPIRUN[@]}" -np 3 "$S" run "$T/cut.json" --workers 2 --json --digest --quiet) || fail "mpirun: $out"
tr=$(echo "$out" | grep '"role": "trainer"')
[ "$(echo "$tr" | field elements)" = "$(echo "$one" | field elements)" ] &&
  [ "$(echo "$tr" | field digest)" = "$(echo "$one" | field digest)" ] || fail "the cut spec under mpirun: $out vs $one"
echo "predicted $(echo "$js" | field predicted) elements/s; measured $(echo "$tr" | field elements_per_second) (loaded machine)"
echo "mpi_plan: ok"
