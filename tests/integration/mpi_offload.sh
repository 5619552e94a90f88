#!/usr/bin/env bash
# mpi_offload.sh: `offload` under `mpirun -np 3 sluice run --workers K`: with 1 trainer + 2 workers and with 2
# trainers + 1 worker, the trainers together get exactly the elements of a one-process run (which passes offload
# through), over 2 epochs and uneven files; a trainer stopping early (--take) stops the workers cleanly, and a slow
# trainer holds the workers to the credit window (bounded memory); a worker's error and a worker killed mid-run
# reach the trainer as an error naming the rank, never as a hang (every mpirun runs under `timeout`).
set -u
. "$(dirname "$0")/mpi_common.inc"
"$S" run --help | grep -q -- '--workers' || { echo "SKIP: sluice built without MPI (SL_WITH_MPI=OFF)"; exit 77; }
mkdir -p "$T/d"
for i in 1 2 3 4 5; do seq $((i * 100)) $((i * 100 + i * 7 + 2)) > "$T/d/f$i.txt"; done # 120 lines, uneven files
cat > "$T/lines.json" <<JSON
{"name": "lines", "seed": 2, "ops": [
  {"op": "files", "glob": "$T/d/f*.txt", "shuffle": true},
  {"op": "interleave", "cycle_length": 2, "source": [{"op": "lines"}]},
  {"op": "repeat", "count": 2},
  {"op": "offload"},
  {"op": "map", "fn": "spin", "args": {"us": 5}}]}
JSON
one=$("$S" run "$T/lines.json" --json --digest --quiet) || fail "one process (offload passes through): $one"
n1=$(echo "$one" | field elements); d1=$(echo "$one" | field digest)
[ "$n1" = 240 ] || fail "one process: $n1 elements, expected 240"

check() { # K: -np 3 --workers K; the trainers' counts and digests add up to the one-process run's
  local k=$1 out
  out=$("${MPIRUN[@]}" -np 3 "$S" run "$T/lines.json" --workers "$k" --json --digest --quiet) || fail "--workers $k: $out"
  [ "$(echo "$out" | grep -c '"status": "ok"')" = 3 ] || fail "--workers $k: not 3 ok lines: $out"
  [ "$(echo "$out" | grep -c '"role": "worker"')" = "$k" ] || fail "--workers $k: not $k workers: $out"
  local tr ns ds total=0 n
  tr=$(echo "$out" | grep '"role": "trainer"')
  ns=$(echo "$tr" | field elements); ds=$(echo "$tr" | field digest)
  for n in $ns; do total=$((total + n)); done
  [ "$total" = "$n1" ] || fail "--workers $k: trainers got $ns = $total elements, one process $n1"
  [ "$(sum_digests $ds)" = "$d1" ] || fail "--workers $k: trainers' digests $ds add to $(sum_digests $ds), not $d1"
  local sent=0
  for n in $(echo "$out" | grep '"role": "worker"' | field elements); do sent=$((sent + n)); done
  [ "$sent" = "$n1" ] || fail "--workers $k: the workers sent $sent elements, expected $n1"
}
check 2 # 1 trainer, 2 workers (the files sharded between them)
check 1 # 2 trainers sharing 1 worker by demand

# A slow trainer stopping early: infinite source, 2 ms per element on the trainer, window 4. Every worker ends ok,
# and the credits bound what they sent: at most what the trainer took plus the window per worker.
cat > "$T/inf.json" <<'JSON'
{"name": "inf", "ops": [{"op": "range"}, {"op": "offload"}, {"op": "map", "fn": "spin", "args": {"us": 2000}}]}
JSON
out=$(SLUICE_DIST_WINDOW=4 "${MPIRUN[@]}" -x SLUICE_DIST_WINDOW -np 3 "$S" run "$T/inf.json" --workers 2 --take 50 --json --quiet) ||
  fail "--take 50: $out"
[ "$(echo "$out" | grep -c '"status": "ok"')" = 3 ] || fail "--take 50: not 3 ok lines: $out"
[ "$(echo "$out" | grep '"role": "trainer"' | field elements)" = 50 ] || fail "--take 50: $out"
sent=0; for n in $(echo "$out" | grep '"role": "worker"' | field elements); do sent=$((sent + n)); done
[ "$sent" -ge 50 ] && [ "$sent" -le $((50 + 2 * 4)) ] || fail "workers sent $sent for a trainer taking 50 (window 4)"

# A worker's pipeline fails: the trainer's error names the rank and the worker's message.
cat > "$T/bad.json" <<JSON
{"name": "bad", "ops": [{"op": "files", "glob": "$T/d/f*.txt"}, {"op": "interleave", "source": [{"op": "lines"}]},
  {"op": "map", "fn": "decode_jpeg", "args": {"component": "line"}}, {"op": "offload"}]}
JSON
out=$("${MPIRUN[@]}" -np 2 "$S" run "$T/bad.json" --workers 1 --json --quiet 2>&1); rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "a failing worker: exit $rc: $out"
echo "$out" | grep '"role": "trainer"' | grep -q '"error": "ops\[3\] (offload): rank 1 (worker) failed: ops\[2\]: .*not a JPEG' ||
  fail "the trainer's error does not name worker rank 1 and its op: $out"

# A worker killed mid-run (after it opened its data): the trainer fails naming it, within the timeout.
cat > "$T/kill.json" <<JSON
{"name": "kill", "ops": [{"op": "files", "glob": "$T/d/f*.txt"}, {"op": "interleave", "cycle_length": 1,
  "source": [{"op": "lines"}]}, {"op": "repeat"}, {"op": "offload"}]}
JSON
cat > "$T/wrap.sh" <<EOF
#!/usr/bin/env bash
if [ "\$OMPI_COMM_WORLD_RANK" = 2 ]; then
  "$S" run "$T/kill.json" --workers 2 --json --quiet > /dev/null & p=\$!
  until ls -l /proc/\$p/fd 2>/dev/null | grep -q "$T/d/f"; do sleep 0.05; done
  kill -9 \$p; wait \$p; exit 0
fi
exec "$S" run "$T/kill.json" --workers 2 --json --quiet
EOF
chmod +x "$T/wrap.sh"
out=$("${MPIRUN[@]}" --enable-recovery -np 3 "$T/wrap.sh" 2>&1); rc=$?
[ $rc != 124 ] || fail "a killed worker: the job hung: $out"
echo "$out" | grep '"role": "trainer"' | grep -q '"status": "error".*"error": "ops\[3\] (offload): rank 2 (worker) died' ||
  fail "the trainer's error does not name the killed worker rank 2: $out"
echo "$out" | grep '"rank": 1,' | grep -q '"status": "ok"' || fail "the surviving worker did not end cleanly: $out"

# A worker whose own run fails before it serves (its spec cannot be built there): the trainer fails naming it.
echo '{"ops": [{"op": "files", "glob": "/nonexistent/*.txt"}, {"op": "offload"}]}' > "$T/nofiles.json"
printf '#!/usr/bin/env bash\nspec=%s\n[ "$OMPI_COMM_WORLD_RANK" = 1 ] && spec=%s\nexec "%s" run "$spec" --workers 1 --json --quiet\n' \
  "$T/lines.json" "$T/nofiles.json" "$S" > "$T/wrap2.sh"
chmod +x "$T/wrap2.sh"
out=$("${MPIRUN[@]}" --enable-recovery -np 2 "$T/wrap2.sh" 2>&1); rc=$?
[ $rc != 124 ] || fail "a worker that never served: the job hung: $out"
echo "$out" | grep '"role": "trainer"' | grep -q '"error": "ops\[3\] (offload): rank 1 (worker) failed: it did not start' ||
  fail "the trainer's error does not name worker rank 1, which never served: $out"

# Without MPI, --workers is an error that says why; offload alone passes through (above).
out=$(env -u OMPI_COMM_WORLD_SIZE "$S" run "$T/lines.json" --workers 1 --quiet 2>&1) && fail "--workers without mpirun ran"
echo "$out" | grep -q 'needs MPI (start the job with mpirun)' || fail "--workers without mpirun: $out"
out=$("${MPIRUN[@]}" -np 2 "$S" run "$T/lines.json" --workers 2 --quiet 2>&1) && fail "--workers 2 of 2 ranks ran"
echo "$out" | grep -q 'at least one must be a trainer' || fail "--workers 2 of 2: $out"
echo "mpi_offload: ok"
