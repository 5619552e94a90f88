#!/usr/bin/env bash
# bench/prov_bench.sh SLUICE quick|full: the provenance figures of BENCHMARKS.md (issues 6 and 7), run by bench/run.
#  1. Recording rate: build/prov_bench (next to SLUICE) on a fresh SQLite store, then on a fresh database of a
#     throw-away PostgreSQL server (tools/pg_start.sh, stopped on any exit).
#  2. Analytics: `sluice prov gen`, then graphlets, waste, train, simulate, each timed (wall, peak RSS via wait4).
#     Each step's wall and CPU (user + system) seconds: the machine is shared, and CPU time moves less under load.
#     quick: the default corpus (50 pipelines) on SQLite, 10 pipelines on PostgreSQL; full: paper scale (3,000
#     pipelines, 120 days: ~460k graphlets) on both (targets: the five steps in <= 3 min on SQLite, <= 10 min on
#     PostgreSQL; docs/provenance.md).
# Progress goes to stderr; the last line of stdout is one JSON object. A part that fails (no PostgreSQL, say) is
# named in the JSON's "errors" and the rest is still measured. Exit 0: every part ran; 3: some part failed; 2: usage.
set -uo pipefail
usage() { echo "usage: bench/prov_bench.sh SLUICE quick|full" >&2; exit 2; }
[ $# -eq 2 ] || usage
case "$2" in quick | full) mode=$2 ;; *) usage ;; esac
[ -x "$1" ] || { echo "prov_bench: $1 is not an executable sluice" >&2; exit 2; }
sluice=$(readlink -f "$1")
top=$(cd "$(dirname "$0")/.." && pwd)
recorder=$(dirname "$sluice")/prov_bench
command -v python3 >/dev/null || { echo "prov_bench: python3 is needed (make deps)" >&2; exit 2; }

if [ "$mode" = quick ]; then
  rec_n=300 rec_rounds=1 lite_pipelines=50 pg_pipelines=10
else
  rec_n=1000 rec_rounds=3 lite_pipelines=3000 pg_pipelines=3000
fi
days=120 seed=1

work=$(mktemp -d /tmp/sluice-provbench.XXXXXX)
pgdir=""
cleanup() {
  [ -n "$pgdir" ] && bash "$top/tools/pg_stop.sh" "$pgdir"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "prov_bench: $*" >&2; }
fail() { log "FAILED: $*"; echo "$*" >>"$work/errors"; }
note() { echo "$*" >>"$work/notes"; }
: >"$work/errors"
: >"$work/notes"
cat /proc/loadavg >"$work/load.start"

# measure.py OUT CMD...: runs CMD with stdout to OUT.out and stderr to OUT.err, writes OUT.time (wall seconds,
# CPU seconds, peak RSS in kB of that child alone, from wait4) and exits with CMD's status.
cat >"$work/measure.py" <<'PY'
import json, os, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
with open(out + ".out", "w") as so, open(out + ".err", "w") as se:
    p = subprocess.Popen(cmd, stdout=so, stderr=se)
    _, status, ru = os.wait4(p.pid, 0)
wall = time.monotonic() - t0
rc = os.waitstatus_to_exitcode(status)
json.dump({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_kb": ru.ru_maxrss, "rc": rc},
          open(out + ".time", "w"))
sys.exit(rc)
PY

# step BACKEND NAME CMD...: one timed command; its files are $work/BACKEND.NAME.{out,err,time}.
step() {
  local be=$1 name=$2
  shift 2
  log "$be: $name"
  if python3 "$work/measure.py" "$work/$be.$name" "$@"; then
    log "$be: $name: $(python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); print("%.1f s, %.0f MiB" % (t["wall_s"], t["peak_rss_kb"] / 1024))' "$work/$be.$name.time")"
    return 0
  fi
  fail "$be: sluice prov $name failed: $(tail -c 300 "$work/$be.$name.err" | tr '\n' ' ')"
  return 1
}

# record BACKEND URI: the recording rate into a fresh store.
record() {
  log "$1: recording $rec_n executions per process, 1 and 8 processes, $rec_rounds round(s)"
  if "$recorder" "$2" --n "$rec_n" --procs 1,8 --rounds "$rec_rounds" >"$work/$1.record.json" 2>"$work/$1.record.err"; then
    cat "$work/$1.record.err" >&2
  else
    cat "$work/$1.record.err" >&2
    rm -f "$work/$1.record.json"
    fail "$1: prov_bench failed: $(tail -c 300 "$work/$1.record.err" | tr '\n' ' ')"
  fi
}

# analytics BACKEND URI PIPELINES: gen, graphlets, waste, train, simulate on a fresh store.
analytics() {
  local be=$1 uri=$2 n=$3
  echo "$n" >"$work/$be.pipelines"
  step "$be" gen "$sluice" prov gen "$uri" --pipelines "$n" --days "$days" --seed "$seed" --json || return
  # graphlets --json lists every graphlet (hundreds of MB at paper scale): time the table, read its summary line.
  step "$be" graphlets "$sluice" prov graphlets "$uri" || return
  step "$be" waste "$sluice" prov waste "$uri" --json || return
  step "$be" train "$sluice" prov train "$uri" -o "$work/$be.model.json" --json || return
  step "$be" simulate "$sluice" prov simulate "$uri" --model "$work/$be.model.json" --json || return
}

# ---- SQLite
if [ -x "$recorder" ]; then
  record sqlite "$work/record.sqlite"
else
  fail "sqlite: $recorder not built (cmake --build build): no recording figures"
fi
rm -f "$work"/record.sqlite*
log "sqlite: analytics on $lite_pipelines pipelines x $days days (seed $seed)"
analytics sqlite "$work/corpus.sqlite" "$lite_pipelines"
rm -f "$work"/corpus.sqlite*

# ---- PostgreSQL (a throw-away server on loopback; its directory under /tmp, where its user can reach it)
pg_admin=""
pgdir=$(mktemp -u /tmp/sluice-provbench-pg.XXXXXX)
if bash "$top/tools/pg_start.sh" "$pgdir" >/dev/null 2>"$work/pg_start.err"; then
  pg_admin=$(cat "$pgdir/uri")
  pg_bin=$(cat "$pgdir/bin")
  "$pg_bin/psql" "$pg_admin" -qAt -c "SELECT 'PostgreSQL ' || current_setting('server_version') || ', fsync=' || current_setting('fsync') || ', synchronous_commit=' || current_setting('synchronous_commit')" \
    >"$work/pg.server" 2>/dev/null
  log "postgresql: $(cat "$work/pg.server") on loopback"
else
  fail "postgresql: no server (tools/pg_start.sh: $(tail -c 300 "$work/pg_start.err" | tr '\n' ' ')): SQLite figures only"
fi
# pg_db NAME: a fresh database; prints its URI.
pg_db() {
  "$pg_bin/psql" "$pg_admin" -qAt -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null 2>>"$work/pg_db.err" &&
    echo "${pg_admin%/*}/$1"
}
if [ -n "$pg_admin" ]; then
  if [ -x "$recorder" ]; then
    if uri=$(pg_db bench_record); then record postgresql "$uri"; else fail "postgresql: CREATE DATABASE failed: $(tail -c 300 "$work/pg_db.err")"; fi
  fi
  log "postgresql: analytics on $pg_pipelines pipelines x $days days (seed $seed)"
  if uri=$(pg_db bench_corpus); then analytics postgresql "$uri" "$pg_pipelines"; else fail "postgresql: CREATE DATABASE failed: $(tail -c 300 "$work/pg_db.err")"; fi
  [ "$mode" = quick ] && note "quick: PostgreSQL analytics on $pg_pipelines pipelines, SQLite on the default corpus ($lite_pipelines)"
fi
cat /proc/loadavg >"$work/load.end"

# ---- one JSON line from the files above
python3 - "$work" "$mode" "$rec_n" "$rec_rounds" "$days" "$seed" <<'PY'
import json, os, re, sys
work, mode, rec_n, rec_rounds, days, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])

def read(name):
    p = os.path.join(work, name)
    return open(p).read() if os.path.exists(p) else None

def jread(name):
    s = read(name)
    if not s or not s.strip():
        return None
    try:
        return json.loads(s.strip().splitlines()[-1] if name.endswith(".record.json") else s)
    except ValueError:
        return None

errors = [l for l in (read("errors") or "").splitlines() if l]
res = {"mode": mode, "record": {}, "analytics": {}, "notes": [l for l in (read("notes") or "").splitlines() if l],
       "errors": errors, "load_average": [(read("load.start") or "").split()[:3], (read("load.end") or "").split()[:3]]}
if read("pg.server"):
    res["postgresql_server"] = read("pg.server").strip()
for be in ("sqlite", "postgresql"):
    r = jread(be + ".record.json")
    if r:
        res["record"][be] = r
    if read(be + ".pipelines") is None:
        continue
    a = {"pipelines": int(read(be + ".pipelines")), "days": days, "seed": seed, "steps": {}}
    for st in ("gen", "graphlets", "waste", "train", "simulate"):
        t = jread("%s.%s.time" % (be, st))
        if t and t["rc"] == 0:
            a["steps"][st] = {"wall_s": round(t["wall_s"], 2), "cpu_s": round(t["cpu_s"], 2),
                              "peak_rss_mb": round(t["peak_rss_kb"] / 1024, 1)}
    done = a["steps"]
    a["complete"] = len(done) == 5
    if done:
        a["total_s"] = round(sum(s["wall_s"] for s in done.values()), 2)
        a["total_cpu_s"] = round(sum(s["cpu_s"] for s in done.values()), 2)
        a["peak_rss_mb"] = max(s["peak_rss_mb"] for s in done.values())
    g = jread(be + ".gen.out")
    if g:
        a.update({k: g[k] for k in ("runs", "executions", "artifacts", "events") if k in g})
    m = re.search(r"^(\d+) graphlets, (\d+) pushed", read(be + ".graphlets.out") or "", re.M)
    if m:
        a["graphlets"], a["pushed"] = int(m.group(1)), int(m.group(2))
        a["push_rate"] = round(a["pushed"] / a["graphlets"], 4) if a["graphlets"] else None
        a["never_pushed_share"] = round(1 - a["push_rate"], 4) if a["graphlets"] else None
    w = jread(be + ".waste.out")
    if w:
        a["wasted_share"] = w.get("wasted_share")
    t = jread(be + ".train.out")
    if t:
        a.update({"roc_auc": t.get("roc_auc"), "pr_auc": t.get("pr_auc"), "train_graphlets": t.get("train_graphlets"),
                  "test_graphlets": t.get("test_graphlets")})
    s = jread(be + ".simulate.out")
    if s:
        keep = ("threshold", "saved_share", "push_recall", "cadence", "staleness_ratio")
        for k, src in (("prune_recall99", "best_recall99"), ("prune_fresh", "best"), ("ceiling_recall99", "ceiling_best_recall99")):
            if s.get(src):
                a[k] = {x: s[src].get(x) for x in keep}
    res["analytics"][be] = a
print(json.dumps(res))
PY
[ -s "$work/errors" ] && exit 3
exit 0
