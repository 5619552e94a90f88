"""What every peer script of bench/peers shares: the cores it may use, a measured window over an iterator of batches
(examples/s and the CPU of the whole process tree in that window), and the one JSON line it prints.

Each peer script runs one configuration of one pipeline for --warmup + --seconds and prints
{"peer", "version", "pipeline", "config", "examples", "seconds", "examples_per_second", "cpu_seconds"}.
"""
import argparse, json, os, time


def cores():
    """The cores this process may run on (bench/run sets the affinity alike for sluice and every peer)."""
    return len(os.sched_getaffinity(0))


def _ticks(pid):
    """utime + stime of one process (all its threads), in clock ticks; 0 when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return int(parts[11]) + int(parts[12])
    except (OSError, IndexError, ValueError):
        return 0


def _descendants(pid):
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    for c in list(out):
        out += _descendants(c)
    return out


def tree_cpu():
    """CPU seconds of this process and its live descendants (DataLoader and SPDL worker processes are charged too)."""
    me = os.getpid()
    return sum(_ticks(p) for p in [me] + _descendants(me)) / os.sysconf("SC_CLK_TCK")


def args(doc, pipelines, configs):
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--pipeline", choices=pipelines, default=pipelines[0])
    ap.add_argument("--config", choices=configs, default=configs[0])
    ap.add_argument("--files", required=True, help="the glob of the suite's data files (as the spec names them)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--workers", type=int, default=0, help="worker threads/processes (0: the usable cores)")
    ap.add_argument("--vocab", default="", help="transformer: the vocabulary file")
    return ap.parse_args()


def measure(batches, warmup, seconds):
    """Pulls batches (an iterator of example counts) for warmup s, then counts examples for seconds s; returns
    (examples, wall seconds, CPU seconds of the process tree) of the measured window."""
    t0 = time.monotonic()
    start = None
    n = 0
    for k in batches:
        now = time.monotonic()
        if start is None:
            if now - t0 >= warmup:
                start, c0 = now, tree_cpu()
            continue
        n += k
        if now - start >= seconds:
            return n, now - start, tree_cpu() - c0
    raise SystemExit("the pipeline ended before the measurement did")


def report(peer, version, pipeline, config, n, el, cpu, **extra):
    r = {"peer": peer, "version": version, "pipeline": pipeline, "config": config, "examples": n, "seconds": el,
         "examples_per_second": n / el if el else 0, "cpu_seconds": cpu}
    r.update(extra)
    print(json.dumps(r), flush=True)
