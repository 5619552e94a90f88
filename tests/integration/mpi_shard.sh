#!/usr/bin/env bash
# mpi_shard.sh: shard "auto" under `mpirun -np 3 sluice run --json --digest`: each rank prints its own line with
# "rank", "elements" and "digest"; over the ranks every element comes exactly once per epoch (counts and digests
# add up to a one-process run) with uneven files shuffled per epoch over 2 epochs; "pad" and "drop" give every rank
# the same count; torchrun's WORLD_SIZE/RANK give the same shards without MPI.
set -u
. "$(dirname "$0")/mpi_common.inc"
mkdir -p "$T/d"
for i in 1 2 3 4 5; do seq $((i * 100)) $((i * 100 + i * 7 + 2)) > "$T/d/f$i.txt"; done # 11, 18, .. 37 lines
files() { # NAME SHARD-OP
  cat > "$T/$1.json" <<JSON
{"name": "$1", "seed": 5, "ops": [
  {"op": "files", "glob": "$T/d/f*.txt", "shuffle": true}, $2
  {"op": "interleave", "cycle_length": 2, "source": [{"op": "lines"}]},
  {"op": "repeat", "count": 2}]}
JSON
}
files whole ''
files ranks '{"op": "shard", "num_shards": "auto", "index": "auto", "remainder": "keep"},'
one=$("$S" run "$T/whole.json" --json --digest --quiet) || fail "one process: $one"
n1=$(echo "$one" | field elements); d1=$(echo "$one" | field digest)
[ "$n1" = 240 ] || fail "one process: $n1 elements, expected 2 epochs x 120 lines"

out=$("${MPIRUN[@]}" -np 3 "$S" run "$T/ranks.json" --json --digest --quiet) || fail "mpirun: $out"
[ "$(echo "$out" | grep -c '"status": "ok"')" = 3 ] || fail "expected 3 ok lines: $out"
for r in 0 1 2; do echo "$out" | grep -q "\"rank\": $r, \"ranks\": 3" || fail "no line of rank $r: $out"; done
ns=$(echo "$out" | field elements); ds=$(echo "$out" | field digest)
total=0; for n in $ns; do [ "$n" -gt 0 ] || fail "a rank got nothing: $ns"; total=$((total + n)); done
[ "$total" = "$n1" ] || fail "ranks' elements $ns add to $total, one process $n1"
[ "$(sum_digests $ds)" = "$d1" ] || fail "ranks' digests $ds add to $(sum_digests $ds), one process $d1"
[ "$(echo "$ns" | sort -u | wc -l)" -gt 1 ] || fail "uneven files gave even counts ($ns): the test proves less"

# Elements shard: 10 per epoch over 3 ranks. keep: 4,3,3 per epoch; pad: 4 each; drop: 3 each.
for rem in keep pad drop; do
  echo "{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"shard\", \"num_shards\": \"auto\", \"index\": \"auto\", \"remainder\": \"$rem\"}, {\"op\": \"repeat\", \"count\": 2}]}" > "$T/$rem.json"
  out=$("${MPIRUN[@]}" -np 3 "$S" run "$T/$rem.json" --json --digest --quiet) || fail "mpirun $rem: $out"
  ns=$(echo "$out" | field elements | sort | tr '\n' ' ')
  case $rem in keep) want='6 6 8 ';; pad) want='8 8 8 ';; drop) want='6 6 6 ';; esac
  [ "$ns" = "$want" ] || fail "remainder $rem: counts $ns, expected $want"
done
# the default under "auto" is pad (every rank the same number of steps)
sed 's/, "remainder": "pad"//' "$T/pad.json" > "$T/default.json"
out=$("${MPIRUN[@]}" -np 3 "$S" run "$T/default.json" --json --quiet) || fail "mpirun default: $out"
[ "$(echo "$out" | field elements | sort -u | tr -d '\n')" = 8 ] || fail "default remainder is not pad: $out"

# torchrun's variables, no MPI: the same shards.
total=0; dsum=()
for r in 0 1 2; do
  js=$(env -u OMPI_COMM_WORLD_SIZE WORLD_SIZE=3 RANK=$r "$S" run "$T/ranks.json" --json --digest --quiet) || fail "RANK=$r: $js"
  echo "$js" | grep -q "\"rank\": $r, \"ranks\": 3" || fail "RANK=$r: no rank in $js"
  total=$((total + $(echo "$js" | field elements))); dsum+=("$(echo "$js" | field digest)")
done
[ "$total" = "$n1" ] && [ "$(sum_digests "${dsum[@]}")" = "$d1" ] || fail "WORLD_SIZE/RANK shards do not add up"
echo "mpi_shard: ok"
