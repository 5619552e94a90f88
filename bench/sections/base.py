"""bench/sections/base.py: the helpers every section shares: the suite's pipelines, data and sizes, logging, running and
measuring a command (CPU, RSS), the machine's description, the data generation, number formatting and splicing a
section into an existing report."""
import datetime, os, platform, shutil, statistics, subprocess, sys, tempfile, time


TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository


PIPELINES = ["imagenet", "ssd", "transformer", "tabular", "imagenet-cacheable"]


DATA = {  # pipeline -> (generator kind, folder)
    "imagenet": ("imagenet", "bench/data/imagenet"), "imagenet-cacheable": ("imagenet", "bench/data/imagenet"),
    "ssd": ("ssd", "bench/data/ssd"), "transformer": ("text", "bench/data/text"),
    "tabular": ("tabular", "bench/data/tabular"),
}


SIZES = {  # kind -> (records full, shards full, records quick, shards quick)
    "imagenet": (1536, 8, 96, 2), "ssd": (768, 4, 64, 2), "text": (40000, 4, 2000, 2), "tabular": (400000, 4, 20000, 2),
}


SEED = 7


TUNER_WARMUP = (3.0, 12.0)  # quick, full: seconds the online tuner runs before `tuner` is measured


ROUNDS = ((3, 3), (3, 6))  # quick, full: least and most rounds of a pipeline's alternating runs


ROUND_SPREAD = 0.10  # a pipeline gets another round while a compared ratio's rounds are further apart than this


T0 = time.monotonic()


def log(*a):
    print("bench: [%4.0f s]" % (time.monotonic() - T0), *a, file=sys.stderr, flush=True)


def run_cmd(cmd, env=None, timeout=900):
    """Runs cmd; returns (stdout, stderr, exit code)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, cwd=TOP, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise SystemExit("bench: timed out: %s" % " ".join(cmd))
    return out, err, p.returncode


def measure(cmd, env=None, timeout=900):
    """Runs cmd and returns (stdout, cpu seconds, peak RSS kB) of that child alone, via wait4."""
    e = dict(os.environ)
    if env:
        e.update(env)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=e, cwd=TOP)
        t0 = time.monotonic()
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                p.kill()
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        o, r = out.read(), err.read()
    if p.returncode != 0:
        raise SystemExit("bench: command failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), r[-2000:]))
    return o, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def machine():
    model = "unknown"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal"):
            mem = int(line.split()[1]) // 1024
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=TOP, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=TOP, capture_output=True, text=True).stdout.strip()
        if dirty:
            commit += " (with uncommitted changes)"
    except OSError:
        commit = "unknown"
    return {"cores": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)), "memory_mb": mem, "cpu": model,
            "kernel": platform.release(), "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit}


def gen_data(sluice, kinds, quick):
    for kind in sorted(set(kinds)):
        n, shards, nq, sq = SIZES[kind]
        if quick:
            n, shards = nq, sq
        folder = dict((k, f) for k, f in DATA.values())[kind] + ("-quick" if quick else "")
        marker = os.path.join(TOP, folder, ".sluice-gen")
        want = "%s n=%d shards=%d seed=%d" % (kind, n, shards, SEED)
        if os.path.exists(marker) and open(marker).read().strip() == want:
            continue
        shutil.rmtree(os.path.join(TOP, folder), ignore_errors=True)
        log("generating %s (%d records) in %s" % (kind, n, folder))
        out, err, rc = run_cmd([sluice, "gen", kind, "--out", folder, "--n", str(n), "--shards", str(shards),
                                "--seed", str(SEED), "--quiet"])
        if rc:
            raise SystemExit("bench: sluice gen %s failed: %s" % (kind, err))
        open(marker, "w").write(want + "\n")
        log(out.strip().replace("\n", "; "))


def spread(xs):
    """(largest - smallest) / median: how far apart runs of one configuration were."""
    med = statistics.median(xs) if xs else 0
    return (max(xs) - min(xs)) / med if med else None


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def med_range(xs, nd=2):
    """'median (min-max)' of per-round figures."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return "%s (%s-%s)" % (fmt(statistics.median(xs), nd), fmt(min(xs), nd), fmt(max(xs), nd))


def splice_section(path, lines, head="## Against other input pipelines"):
    """Replaces (or appends) the section starting `head` (the peers', by default) of an existing BENCHMARKS.md,
    leaving the rest as it was."""
    old = open(path).read() if os.path.exists(path) else ""
    new = "\n".join(lines) + "\n"
    i = old.find(head)
    if i < 0:
        out = old.rstrip("\n") + "\n\n" + new
    else:
        j = old.find("\n## ", i + len(head))
        out = old[:i] + new + (old[j + 1:] if j >= 0 else "")
    open(path, "w").write(out)


def fmt(x, nd=1):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    return ("{:.%df}" % nd).format(x)


def ratio(a, b):
    return None if not a or not b else a / b


def pct(x, nd=1):
    return "-" if x is None else ("{:.%df}%%" % nd).format(100 * x)


def formats_bench():
    """bench/formats.py (issue 36's layouts: TFRecord, image folder, tar shards, and their PyTorch readers)."""
    sys.path.insert(0, os.path.join(TOP, "bench"))
    import formats
    return formats
