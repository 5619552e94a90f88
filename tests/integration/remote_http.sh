#!/usr/bin/env bash
# remote_http.sh: remote shards over HTTP and HTTPS from an nginx the test starts on loopback (remote_common.inc):
# tar, tfrecord (in an interleave) and lines read from URLs, with 50 ms to first byte and small blocks (many ranged
# requests), give the digests of the same files read locally; through a proxy that answers 5% of the requests with
# 503 and cuts 2% mid-body they give them too (the retries resume at the byte reached: nothing lost or repeated);
# a missing object, a server that stays down and an unknown CA fail with messages naming the URL (never its
# password), and on_error "skip" skips the unreachable shard, counted.
set -u
S=${SL_CLI:?}
D=$(dirname "$0")
. "$D/remote_common.inc"
nginx_available || { echo "SKIP: nginx, its echo module or openssl missing (make deps)"; exit 77; }
T=$(mktemp -d)
PROXY_PID=
PACE_PID=
LAT_PID=
COUNT_PID=
cleanup() {
  nginx_stop
  [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2> /dev/null && wait "$PROXY_PID" 2> /dev/null
  [ -n "$PACE_PID" ] && kill "$PACE_PID" 2> /dev/null && wait "$PACE_PID" 2> /dev/null
  [ -n "$LAT_PID" ] && kill "$LAT_PID" 2> /dev/null && wait "$LAT_PID" 2> /dev/null
  [ -n "$COUNT_PID" ] && kill "$COUNT_PID" 2> /dev/null && wait "$COUNT_PID" 2> /dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$T/www"
"$S" gen imagenet --out "$T/www/tar" --format tar --n 40 --shards 4 --quiet > /dev/null || fail "gen tar"
"$S" gen imagenet --out "$T/www/tfr" --n 40 --shards 4 --quiet > /dev/null || fail "gen tfrecord"
"$S" gen text --out "$T/www/txt" --n 400 --shards 2 --quiet > /dev/null || fail "gen text"
nginx_start "$T/nginx" "$T/www" || fail "nginx"
H=http://127.0.0.1:$HTTP_PORT
HS=https://127.0.0.1:$HTTPS_PORT
export SLUICE_REMOTE_BLOCK=65536 SLUICE_REMOTE_INFLIGHT=3 SLUICE_REMOTE_BACKOFF_MS=5 SLUICE_REMOTE_BACKOFF_CAP_MS=50

TAR='{"op": "tar"}, {"op": "map", "fn": "select", "args": {"keep": ["jpg", "cls", "__key__"]}}' # __url__ differs
TFR='{"op": "interleave", "cycle_length": 2, "parallelism": 2, "source": [{"op": "tfrecord"}]}'
tar_spec() { echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"$1/train-{00000..00003}-of-00004.tar\"}, $TAR]}" > "$2"; }
tfr_spec() { echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"list\": [\"$1/train-{00000..00003}-of-00004.tfrecord\"]}, $TFR]}" > "$2"; }
txt_spec() { echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"$1/train-{00000..00001}-of-00002.txt\"}, {\"op\": \"lines\"}]}" > "$2"; }
ls "$T/www/txt" | grep -q 'train-00000-of-00002.txt' || fail "gen text names its shards otherwise: $(ls "$T/www/txt")"

tar_spec "$T/www/tar" "$T/tar_local.json"
tfr_spec "$T/www/tfr" "$T/tfr_local.json"
txt_spec "$T/www/txt" "$T/txt_local.json"
dtar=$(digest "$T/tar_local.json"); dtfr=$(digest "$T/tfr_local.json"); dtxt=$(digest "$T/txt_local.json")
[ ${#dtar} -eq 16 ] && [ ${#dtfr} -eq 16 ] && [ ${#dtxt} -eq 16 ] || fail "local digests: '$dtar' '$dtfr' '$dtxt'"

# HTTP, 50 ms to first byte on each request.
tar_spec "$H/slow/tar" "$T/tar_http.json"
tfr_spec "$H/slow/tfr" "$T/tfr_http.json"
txt_spec "$H/slow/txt" "$T/txt_http.json"
[ "$(digest "$T/tar_http.json")" = "$dtar" ] || fail "tar over HTTP: another digest"
[ "$(digest "$T/tfr_http.json")" = "$dtfr" ] || fail "tfrecord over HTTP: another digest"
[ "$(digest "$T/txt_http.json")" = "$dtxt" ] || fail "lines over HTTP: another digest"
# blocks that ramp up (1 MiB: 256 kB, 512 kB, then 1 MiB from 768 kB; the shards hold about 1.1 MB)
for f in tar tfr txt; do
  d=$(SLUICE_REMOTE_BLOCK=1048576 digest "$T/${f}_http.json")
  case $f in tar) want=$dtar ;; tfr) want=$dtfr ;; txt) want=$dtxt ;; esac
  [ "$d" = "$want" ] || fail "$f over HTTP with ramping blocks: another digest"
done
# one object per element (read_file)
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"list\": [\"$H/tfr/train-{00000..00003}-of-00004.tfrecord\"]}, {\"op\": \"map\", \"fn\": \"read_file\", \"args\": {\"output\": \"bytes\"}}, {\"op\": \"map\", \"fn\": \"select\", \"args\": {\"keep\": [\"bytes\"]}}]}" > "$T/rf_http.json"
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"list\": [\"$T/www/tfr/train-{00000..00003}-of-00004.tfrecord\"]}, {\"op\": \"map\", \"fn\": \"read_file\", \"args\": {\"output\": \"bytes\"}}, {\"op\": \"map\", \"fn\": \"select\", \"args\": {\"keep\": [\"bytes\"]}}]}" > "$T/rf_local.json"
[ "$(digest "$T/rf_http.json")" = "$(digest "$T/rf_local.json")" ] || fail "read_file over HTTP: another digest"

# The model: a trace of a remote reader with one request in flight carries its network counters; the analyzer's
# network model gives the latency (at least the 50 ms the server waits) and plans more requests in flight for a
# pipeline whose CPU costs little (the rate it plans for is far above one 64 KiB request per 50 ms).
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"$H/slow/tar/train-{00000..00003}-of-00004.tar\"}, {\"op\": \"tar\", \"readahead\": 1}, {\"op\": \"map\", \"fn\": \"select\", \"args\": {\"keep\": [\"jpg\"]}}]}" > "$T/ra1.json"
timeout 120 "$S" trace "$T/ra1.json" -o "$T/ra1.trace.json" --seconds 1 --repeat > /dev/null 2>&1 || fail "trace a remote spec"
python3 - "$T/ra1.trace.json" <<'PY' || fail "the trace's network counters"
import json, sys
t = json.load(open(sys.argv[1]))
n = [o["network"] for o in t["ops"] if "network" in o]
assert len(n) == 1 and t["ops"][1]["op"] == "tar" and "network" in t["ops"][1], n
n = n[0]
assert n["requests"] >= 2 and n["in_flight"] == 1 and n["block_bytes"] == 65536, n
assert n["ttfb_seconds"] >= 0.045 * n["requests"], n  # the server waits 50 ms before each answer (nginx's timers, on its cached clock, may fire a ms or two early)
PY
timeout 60 "$S" analyze "$T/ra1.trace.json" --json > "$T/ra1.an.json" 2> "$T/err" || fail "analyze: $(cat "$T/err")"
python3 - "$T/ra1.an.json" <<'PY' || fail "the analyzer's network model: $(cat "$T/ra1.an.json")"
import json, sys
a = json.load(open(sys.argv[1]))
n = a["network"][0]
assert n["path"] == "ops[1]" and n["latency_seconds"] >= 0.045 and n["in_flight"] == 1, n
assert n["planned_in_flight"] > 1 and n["planned_rate_bytes"] > n["rate_bytes"], n
PY
"$S" analyze "$T/ra1.trace.json" | grep -Eq "^Network: ops\[1\] \(tar\)( is the limit, waiting on the network)?: " || fail "analyze names no network line"

# Remote bytes are network bytes, not disk bytes: a trace of each remote reader (tar, tfrecord, lines, and
# read_file's map) has disk_bytes 0 and network bytes > 0 for it, so the analyzer prices no disk and no page cache.
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"list\": [\"$H/tfr/train-{00000..00003}-of-00004.tfrecord\"]}, {\"op\": \"tfrecord\"}]}" > "$T/nd_tfr.json"
tar_spec "$H/tar" "$T/nd_tar.json"
txt_spec "$H/txt" "$T/nd_txt.json"
for k in tar tfr txt; do
  timeout 120 "$S" trace "$T/nd_$k.json" -o "$T/nd_$k.trace.json" --seconds 1 --repeat > /dev/null 2> "$T/err" ||
    fail "trace nd_$k: $(cat "$T/err")"
  python3 - "$T/nd_$k.trace.json" <<'PY' || fail "$k over HTTP counts its bytes as disk bytes"
import json, sys
t = json.load(open(sys.argv[1]))
r = [o for o in t["ops"] if "network" in o]
assert len(r) == 1 and r[0]["network"]["bytes"] > 0, r
assert r[0]["disk_bytes"] == 0, (r[0]["path"], r[0]["disk_bytes"], r[0]["network"]["bytes"])
assert sum(o["disk_bytes"] for o in t["ops"]) == 0, [o["disk_bytes"] for o in t["ops"]]
PY
  out=$(timeout 60 "$S" analyze "$T/nd_$k.trace.json" 2>&1) || fail "analyze nd_$k: $out"
  echo "$out" | grep -Eiq "page cache|came from the device|disk" && fail "analyze of remote $k speaks of a disk: $out"
done
timeout 120 "$S" trace "$T/rf_http.json" -o "$T/nd_rf.trace.json" --seconds 1 --repeat > /dev/null 2> "$T/err" ||
  fail "trace read_file: $(cat "$T/err")"
python3 - "$T/nd_rf.trace.json" <<'PY' || fail "read_file over HTTP counts its bytes as disk bytes"
import json, sys
t = json.load(open(sys.argv[1]))
assert sum(o["disk_bytes"] for o in t["ops"]) == 0, [o["disk_bytes"] for o in t["ops"]]
PY

# HTTPS with the test's CA; without it the certificate is refused, naming the URL.
tar_spec "$HS/tar" "$T/tar_https.json"
[ "$(SLUICE_CA_BUNDLE=$T/nginx/ca.pem digest "$T/tar_https.json")" = "$dtar" ] || fail "tar over HTTPS: another digest"
out=$(timeout 60 "$S" run "$T/tar_https.json" --quiet 2>&1) && fail "HTTPS without the CA ran: $out"
echo "$out" | grep -q "$HS/tar/train-0000" || fail "the certificate error names no URL: $out"
echo "$out" | grep -qi "certificate" || fail "the certificate error does not say so: $out"

# Faults: 503s and bodies cut short, through the proxy; the same digests.
python3 "$D/remote_proxy.py" "$T/proxy.port" "$HTTP_PORT" "$T/proxy.stats" 20 50 &
PROXY_PID=$!
for i in $(seq 100); do [ -s "$T/proxy.port" ] && break; sleep 0.1; done
[ -s "$T/proxy.port" ] || fail "the fault proxy did not start"
P=http://127.0.0.1:$(cat "$T/proxy.port")
tar_spec "$P/tar" "$T/tar_faults.json"
tfr_spec "$P/tfr" "$T/tfr_faults.json"
[ "$(digest "$T/tar_faults.json")" = "$dtar" ] || fail "tar through faults: another digest ($(cat "$T/proxy.stats"))"
[ "$(digest "$T/tfr_faults.json")" = "$dtfr" ] || fail "tfrecord through faults: another digest ($(cat "$T/proxy.stats"))"
stats=$(cat "$T/proxy.stats")
n503=$(echo "$stats" | sed -n 's/.*503=\([0-9]*\).*/\1/p'); ncut=$(echo "$stats" | sed -n 's/.*cut=\([0-9]*\).*/\1/p')
[ "${n503:-0}" -ge 2 ] && [ "${ncut:-0}" -ge 1 ] || fail "the proxy injected too few faults to test anything: $stats"
echo "faults injected: $stats"

# Keep: a reader with "keep" reads each object over the network once; the later epochs of a repeat read its copy in
# memory (counted in its trace as kept), with the digest of the same epochs read locally. With a budget too small
# for any object, every epoch reads the network again. Through the fault proxy too: a body cut short and resumed
# is kept whole. Requests are counted by a proxy that injects no faults (its 503 and cut patterns set past reach).
keep_spec() { # URL_PREFIX KEEP FILE: 3 epochs of the shards in a shuffled order each, read by tar with "keep"
  echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"$1/train-{00000..00003}-of-00004.tar\", \"shuffle\": true}, {\"op\": \"repeat\", \"count\": 3}, {\"op\": \"tar\", \"keep\": $2}, {\"op\": \"map\", \"fn\": \"select\", \"args\": {\"keep\": [\"jpg\", \"cls\", \"__key__\"]}}]}" > "$3"
}
keep_spec "$T/www/tar" 0 "$T/keep_local.json"
dkeep=$(digest "$T/keep_local.json")
keep_spec "$P/tar" 100000000 "$T/keep_faults.json"
[ "$(digest "$T/keep_faults.json")" = "$dkeep" ] || fail "tar with keep through faults: another digest ($(cat "$T/proxy.stats"))"
python3 "$D/remote_proxy.py" "$T/count.port" "$HTTP_PORT" "$T/count.stats" 1000000000 1000000000 &
COUNT_PID=$!
for i in $(seq 100); do [ -s "$T/count.port" ] && break; sleep 0.1; done
[ -s "$T/count.port" ] || fail "the counting proxy did not start"
C=http://127.0.0.1:$(cat "$T/count.port")
requests() { sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$T/count.stats"; }
tar_spec "$C/tar" "$T/count_one.json"
[ "$(digest "$T/count_one.json")" = "$dtar" ] || fail "one epoch through the counting proxy: another digest"
r1=$(requests)
keep_spec "$C/tar" 100000000 "$T/count_keep.json"
[ "$(digest "$T/count_keep.json")" = "$dkeep" ] || fail "3 epochs with keep: another digest"
r2=$(requests)
keep_spec "$C/tar" 1000 "$T/count_small.json"
[ "$(digest "$T/count_small.json")" = "$dkeep" ] || fail "3 epochs with a keep too small: another digest"
r3=$(requests)
kill "$COUNT_PID" 2> /dev/null; wait "$COUNT_PID" 2> /dev/null; COUNT_PID=
one=$r1 kept=$((r2 - r1)) small=$((r3 - r2))
echo "requests: one epoch $one, 3 epochs with keep $kept, with a keep too small $small"
[ "$kept" -le $((one + one / 5 + 2)) ] || fail "3 epochs with keep made $kept requests, one epoch $one"
[ "$small" -ge $((2 * one)) ] || fail "a keep too small for any object still saved requests: $small against $one an epoch"
keep_spec "$H/tar" 100000000 "$T/trace_keep.json"
timeout 60 "$S" trace "$T/trace_keep.json" -o "$T/keep.trace.json" --seconds 1 --repeat > /dev/null 2> "$T/err" ||
  fail "trace with keep: $(cat "$T/err")"
python3 - "$T/keep.trace.json" <<'PY' || fail "the trace of a reader with keep"
import json, sys
n = [o["network"] for o in json.load(open(sys.argv[1]))["ops"] if "network" in o][0]
assert n["objects"] > 4 and n["kept"] >= n["objects"] - 4 and n["kept"] > 0, n
PY

# A full link, measured: a proxy that paces every body through one shared budget of 1 MB/s. Each byte is counted
# at most once, alone or with other requests transferring (a request's first bytes in neither); the requests in flight share the budget, so each gets less
# together than one alone, and the analyzer takes the link's bandwidth from the trace (said "measured"), never
# above what the proxy let through (a margin for its 16 kB chunks).
python3 "$D/remote_proxy.py" "$T/pace.port" "$HTTP_PORT" "$T/pace.stats" 1000000000 1000000000 1000000 &
PACE_PID=$!
for i in $(seq 100); do [ -s "$T/pace.port" ] && break; sleep 0.1; done
[ -s "$T/pace.port" ] || fail "the pacing proxy did not start"
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"http://127.0.0.1:$(cat "$T/pace.port")/tar/train-{00000..00003}-of-00004.tar\"}, {\"op\": \"tar\", \"readahead\": 4}, {\"op\": \"map\", \"fn\": \"select\", \"args\": {\"keep\": [\"jpg\"]}}, {\"op\": \"repeat\"}]}" > "$T/pace.json"
timeout 120 "$S" trace "$T/pace.json" -o "$T/pace.trace.json" --seconds 3 > /dev/null 2> "$T/err" ||
  fail "trace through the pacing proxy: $(cat "$T/err")"
kill "$PACE_PID" 2> /dev/null; wait "$PACE_PID" 2> /dev/null; PACE_PID=
python3 - "$T/pace.trace.json" <<'PY' || fail "the link's counters through the pacing proxy"
import json, sys
n = [o["network"] for o in json.load(open(sys.argv[1]))["ops"] if "network" in o][0]
assert n["solo_bytes"] + n["overlap_bytes"] <= n["bytes"] and n["solo_bytes"] > 0 and n["overlap_bytes"] > 0, n
solo = n["solo_bytes"] / n["solo_seconds"]
each = n["overlap_bytes"] / (n["transfer_seconds"] - n["solo_seconds"])
assert each < 0.7 * solo, ("each request got as much with others as alone: no shared link seen", n)
PY
timeout 60 "$S" analyze "$T/pace.trace.json" --json > "$T/pace.an.json" 2> "$T/err" || fail "analyze: $(cat "$T/err")"
python3 - "$T/pace.an.json" "$T/www/tar" <<'PY' || fail "the measured link: $(cat "$T/pace.an.json")"
import json, os, sys
n = json.load(open(sys.argv[1]))["network"][0]
assert n["link_source"] == "measured" and 0 < n["link_bandwidth"] <= 1000000 * 1.25, n
# the trace's repeat reads the shards again, their 4.4 MB fit the memory budget, the link limits: the plan keeps
# them, an epoch's bytes as the shards' sizes give them (their count times the mean size of those opened)
size = sum(os.path.getsize(os.path.join(sys.argv[2], f)) for f in os.listdir(sys.argv[2]) if f.endswith(".tar"))
assert n["read_again"] and abs(n["epoch_bytes"] - size) <= 0.1 * size and n["keep_bytes"] >= n["epoch_bytes"], (n, size)
PY

"$S" analyze "$T/pace.trace.json" 2>&1 | tr -s '\n ' '  ' > "$T/pace.an.txt" || fail "analyze: $(cat "$T/pace.an.txt")"
grep -q "measured: the requests shared a full link" "$T/pace.an.txt" || fail "analyze does not say the link was measured: $(cat "$T/pace.an.txt")"
grep -q "Keep: ops\[1\] keeps its objects in memory" "$T/pace.an.txt" || fail "analyze does not say the plan keeps the shards: $(cat "$T/pace.an.txt")"
echo "link measured through the 1 MB/s proxy: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["network"][0]["link_bandwidth"])' "$T/pace.an.json") B/s"

# The first records wait on an object's first bytes, not on the blocks behind them sharing the link: its first
# blocks ramp up (block/8, /4, /2, never under 256 kB) and no block is asked for past twice what the reader has
# taken (slow start). With 1 MiB blocks: 256 kB at 0, 512 kB at 256 kB, then 1 MiB blocks from 768 kB; through the
# 1 MB/s proxy with 4 requests allowed in flight, the block at 768 kB is asked for only after the first block's body
# was sent (the reader has taken more than 256 kB). Before, all 4 were asked for at once.
PROXY_LOG="$T/first.log" python3 "$D/remote_proxy.py" "$T/first.port" "$HTTP_PORT" "$T/first.stats" 1000000000 \
  1000000000 1000000 &
PACE_PID=$!
for i in $(seq 100); do [ -s "$T/first.port" ] && break; sleep 0.1; done
[ -s "$T/first.port" ] || fail "the pacing proxy (first bytes) did not start"
size=$(stat -c %s "$T/www/tar/train-00000-of-00004.tar")
[ "$size" -gt 786432 ] || fail "the first shard has $size bytes: too few for a third block"
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"list\": [\"http://127.0.0.1:$(cat "$T/first.port")/tar/train-00000-of-00004.tar\"]}, {\"op\": \"tar\", \"readahead\": 4}, {\"op\": \"map\", \"fn\": \"select\", \"args\": {\"keep\": [\"jpg\"]}}]}" > "$T/first.json"
SLUICE_REMOTE_BLOCK=1048576 timeout 120 "$S" run "$T/first.json" --quiet > /dev/null 2> "$T/err" ||
  fail "run through the pacing proxy: $(cat "$T/err")"
kill "$PACE_PID" 2> /dev/null; wait "$PACE_PID" 2> /dev/null; PACE_PID=
python3 - "$T/first.log" <<'PY' || fail "the first blocks of an object: $(cat "$T/first.log")"
import sys
reqs = {l.split()[3]: tuple(float(x) for x in l.split()[:2]) for l in open(sys.argv[1])}  # Range: (came, sent)
assert "bytes=0-262143" in reqs and "bytes=262144-786431" in reqs, ("no ramp of 256 kB, 512 kB", reqs)
third = [r for r in reqs if r.startswith("bytes=786432-")]
assert third, ("no block at 768 kB", reqs)
came = reqs[third[0]][0]
assert came >= reqs["bytes=0-262143"][1] - 0.005, ("the block at 768 kB was asked for before the first arrived", reqs)
PY

# The online tuner follows the network: a run with --tuner sluice through a proxy whose delay before each answer
# the test raises from none to 150 ms mid-run; the tuner's log shows the tar reader's readahead raised, for a time
# to first byte the proxy's delay bounds from below (a floor: load only adds). A 5 ms spin per sample keeps the
# rate the plan asks of the network (and so the first setting) far below the cap of 64. Bounded: the run takes 9 s.
python3 "$D/remote_proxy.py" "$T/lat.port" "$HTTP_PORT" "$T/lat.stats" 1000000000 1000000000 0 "$T/lat.delay" &
LAT_PID=$!
for i in $(seq 100); do [ -s "$T/lat.port" ] && break; sleep 0.1; done
[ -s "$T/lat.port" ] || fail "the delaying proxy did not start"
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"http://127.0.0.1:$(cat "$T/lat.port")/tar/train-{00000..00003}-of-00004.tar\"}, {\"op\": \"tar\"}, {\"op\": \"map\", \"fn\": \"select\", \"args\": {\"keep\": [\"jpg\"]}}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 5000}}, {\"op\": \"repeat\"}]}" > "$T/lat.json"
timeout 120 "$S" run "$T/lat.json" --seconds 9 --tuner sluice --json --quiet > "$T/lat.out" 2> "$T/lat.err" &
RUN_PID=$!
sleep 3
echo 0.15 > "$T/lat.delay"
wait "$RUN_PID" || fail "run --tuner sluice through the delaying proxy: $(cat "$T/lat.err")"
kill "$LAT_PID" 2> /dev/null; wait "$LAT_PID" 2> /dev/null; LAT_PID=
python3 - "$T/lat.out" <<'PY' || fail "the tuner did not raise the readahead when the latency rose: $(cat "$T/lat.out")"
import json, re, sys
r = json.load(open(sys.argv[1]))
ra = [c for c in r["tuner_changes"] if c["knob"] == "readahead"]
assert ra and all(c["op"] == "ops[1]" and c["from"] != c["to"] for c in ra), ra
up = [c for c in ra if c["to"] > c["from"] and float(re.search(r"network: ([0-9.]+) ms to first byte", c["reason"]).group(1)) >= 140]
assert up, ("no raise for the proxy's 150 ms", ra)
print("readahead changes:", [(round(c["t"], 1), c["from"], c["to"]) for c in ra])
PY

# A saved state over HTTP: the run's first 15 samples and the resumed rest add up to the whole; an object changed
# since (a new ETag) refuses the resume, naming it.
js=$(timeout 60 "$S" run "$T/tar_http.json" --take 15 --save-state "$T/st" --digest --json --quiet 2>&1) || fail "save: $js"
d1=$(echo "$js" | sed -n 's/.*"digest": "\([0-9a-f]\{16\}\)".*/\1/p')
js=$(timeout 60 "$S" run "$T/tar_http.json" --resume "$T/st" --digest --json --quiet 2>&1) || fail "resume: $js"
d2=$(echo "$js" | sed -n 's/.*"digest": "\([0-9a-f]\{16\}\)".*/\1/p')
[ "$(printf '%016x' $(( 0x$d1 + 0x$d2 )))" = "$dtar" ] || fail "saved + resumed over HTTP: $d1 + $d2, whole $dtar"
touch -d '2001-02-03 04:05:06' "$T/www/tar/train-00002-of-00004.tar"
out=$(timeout 60 "$S" run "$T/tar_http.json" --resume "$T/st" --quiet 2>&1) && fail "resumed over a changed object"
echo "$out" | grep -q "slow/tar/train-00002-of-00004.tar changed since the state was saved (its ETag" ||
  fail "a changed object's message: $out"

# A missing object: HTTP 404, naming the URL without the password.
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"list\": [\"http://u:SECRETPW@127.0.0.1:$HTTP_PORT/tar/nothere.tar\"]}, {\"op\": \"tar\"}]}" > "$T/missing.json"
out=$(timeout 60 "$S" run "$T/missing.json" --quiet 2>&1) && fail "a missing object ran"
echo "$out" | grep -q "127.0.0.1:$HTTP_PORT/tar/nothere.tar: HTTP 404" || fail "404 message: $out"
echo "$out" | grep -q SECRETPW && fail "the password was printed: $out"
# A server that stays down: the retries run out, the message names the URL, the attempts and the last error.
DOWN=$(free_port)
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"list\": [\"http://127.0.0.1:$DOWN/a.tar\", \"$H/tar/train-00000-of-00004.tar\"]}, {\"op\": \"tar\"}]}" > "$T/down.json"
out=$(SLUICE_REMOTE_RETRIES=2 timeout 60 "$S" run "$T/down.json" --quiet 2>&1) && fail "an unreachable server ran"
echo "$out" | grep -q "127.0.0.1:$DOWN/a.tar.*gave up after 3 attempts" || fail "unreachable message: $out"
# ... and with on_error "skip" the shard is skipped and counted; the other shard is read.
sed 's/{"op": "tar"}/{"op": "tar", "on_error": "skip"}/' "$T/down.json" > "$T/down_skip.json"
js=$(SLUICE_REMOTE_RETRIES=1 timeout 60 "$S" run "$T/down_skip.json" --json --quiet 2>&1) || fail "skip: $js"
echo "$js" | grep -q '"elements": 10,' || fail "skip: the other shard's 10 samples not read: $js"
echo "$js" | grep -q '"skipped": {"ops\[1\]": 1}' || fail "the skipped shard is not counted: $js"
echo "remote_http: all checks passed"
