#!/usr/bin/env python3
"""bench/noise_floor.py: how still is this machine (issue 48)? How close can any prediction made from an earlier
trace come to `sluice optimize`'s final check, when the price is the very configuration checked? For each pipeline
(the image folder and the suite's, as bench/advice_bench.py runs them) it plans once (`sluice optimize --measure
1.5`: its challengers and checks decide) and then runs that one plan back to back, RUNS times (`sluice trace
--seconds S --warmup S/4 --warmup-caches`: a new process and pipeline each time, as optimize's runs are new
pipelines), nothing else changing. Per pipeline: the spread of the
runs' throughput and CPU per element, the lag-1 autocorrelation of the CPU per element (near 0: run-to-run noise;
near 1: slow drift), and, as optimize is timed, one run taken as the price and the median of 3 runs a few runs
later as the check: the share of such pairs within 10% (and 15%), a ceiling on what the advice bench's targets can
show on this machine. Prints one JSON document on stdout and a Markdown table on stderr.

usage: bench/noise_floor.py SLUICE [--only NAME,...] [--runs N] [--seconds S] [--out BENCHMARKS.md]
       bench/noise_floor.py --section RESULT.json [--out BENCHMARKS.md]
--out splices the section "## How still the machine is" into that file.
"""
import argparse, json, os, statistics, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from advice_bench import names_of, run, spec_of  # noqa: E402

HEAD = "## How still the machine is"
# runs between the price and the check's first run: optimize's final check starts some 15-25 s (a few runs of the
# plan's challengers) to a minute after the trace the plan was priced from
GAPS = (3, 10, 20)


def log(*a):
    print("noise_floor:", *a, file=sys.stderr, flush=True)


def pairs(x, gap, tol):
    """Shares of (price = x[k], check = median of x[k+gap .. k+gap+2]) pairs whose check/price is within tol."""
    r = [statistics.median(x[k + gap:k + gap + 3]) / x[k] for k in range(len(x) - gap - 2)]
    return (sum(abs(v - 1) <= tol for v in r) / len(r), min(r), max(r), len(r)) if r else None


def lag1(x):
    m = statistics.fmean(x)
    v = sum((a - m) ** 2 for a in x)
    return sum((x[i] - m) * (x[i + 1] - m) for i in range(len(x) - 1)) / v if v > 0 else 0.0


def measure(sluice, spec_path, wd, tag, runs, seconds):
    plan = os.path.join(wd, tag + ".plan.json")
    r = run([sluice, "optimize", spec_path, "-o", plan, "--seconds", "2", "--measure", "1.5", "--quiet"], timeout=900)
    if r.returncode:
        return {"error": r.stderr.strip().splitlines()[-1:]}
    tput, cpu = [], []
    tr = os.path.join(wd, tag + ".trace.json")
    for k in range(runs):
        r = run([sluice, "trace", plan, "-o", tr, "--seconds", str(seconds), "--warmup", str(seconds / 4),
                 "--warmup-caches", "--no-disk", "--repeat", "--quiet"], timeout=600)
        if r.returncode:
            return {"error": r.stderr.strip().splitlines()[-1:]}
        t = json.load(open(tr))["run"]
        tput.append(t["throughput"])
        cpu.append(t["process_cpu_seconds"] / max(t["elements"], 1))
    out = {"throughput": tput, "cpu_per_element": cpu}
    # a CPU-limited plan's throughput is cores / CPU per element: the price is taken on throughput, as optimize's is
    out["within"] = {str(g): {"10": pairs(tput, g, 0.10), "15": pairs(tput, g, 0.15)} for g in GAPS}
    return out


def section(res):
    m = res["meta"]
    L = [HEAD + " (issue 48, `bench/noise_floor.py`)", "",
         "The plan `sluice optimize --seconds 2 --measure 1.5` picks for each pipeline (challengers and checks "
         "included) run %d times back to back, each a new "
         "process (`sluice trace --seconds %s --warmup %s --warmup-caches --repeat`: a cache's fill is warm-up, as "
         "in optimize's runs), nothing else running; %s at commit %s "
         "(load average at the end %s). A price taken from one run and checked by the median of the 3 runs starting "
         "a few runs later (optimize's final check starts 15-60 s after the trace it priced from; a run here takes "
         "about %.0f s) shows how close any prediction from an earlier trace can come on this machine: the share of "
         "such pairs within 10%% (the advice bench's target alone) and 15%% (beside a hog), with the range of check / "
         "price. Lag-1 autocorrelation of the runs' CPU per element: near 0, run-to-run noise; near 1, slow drift. "
         "Command: `python3 bench/noise_floor.py build/sluice --out BENCHMARKS.md`." % (
             m["runs"], m["seconds"], m["seconds"] / 4, m["date"], m["commit"], m["load"], m["seconds"] * 1.25 + 0.3),
         "",
         "| pipeline | throughput: min - median - max | CPU per element: min - median - max | CV of CPU per element | "
         "lag-1 autocorrelation | within 10% (3 / 10 / 20 runs later) | within 15% (3 / 10 / 20 runs later) | "
         "check / price range (10 runs later) |",
         "| --- | --- | --- | ---: | ---: | --- | --- | --- |"]
    for n, x in res["pipelines"].items():
        if "error" in x:
            L.append("| %s | error: %s | | | | | | |" % (n, " ".join(x["error"])))
            continue
        t, c = x["throughput"], x["cpu_per_element"]
        unit = 1e3 if statistics.median(c) > 1e-3 else 1e6
        u = "ms" if unit == 1e3 else "us"
        w = x["within"]

        def share(tol):
            return " / ".join("-" if w[str(g)][tol] is None else "%.2f" % w[str(g)][tol][0] for g in GAPS)
        g10 = w["10"]["10"]
        L.append("| %s | %.0f - %.0f - %.0f elem/s | %.1f - %.1f - %.1f %s | %.3f | %.2f | %s | %s | %s |" % (
            n, min(t), statistics.median(t), max(t), min(c) * unit, statistics.median(c) * unit, max(c) * unit, u,
            statistics.pstdev(c) / statistics.fmean(c), lag1(c), share("10"), share("15"),
            "-" if g10 is None else "%.3f - %.3f" % (g10[1], g10[2])))
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sluice", nargs="?")
    ap.add_argument("--only", default="")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--section", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from sections.base import machine, splice_section
    if a.section:
        L = section(json.load(open(a.section)))
    else:
        if not a.sluice:
            ap.error("SLUICE is required")
        sluice = os.path.abspath(a.sluice)
        out = {"pipelines": {}}
        with tempfile.TemporaryDirectory(prefix="noise-floor-") as wd:
            for n in names_of(a.only):
                sp = os.path.join(wd, n + ".json")
                json.dump(spec_of(sluice, n), open(sp, "w"))
                log(n)
                out["pipelines"][n] = measure(sluice, sp, wd, n, a.runs, a.seconds)
        mm = machine()
        out["meta"] = {"date": mm["date"], "commit": mm["commit"], "runs": a.runs, "seconds": a.seconds,
                       "load": " ".join("%.2f" % x for x in os.getloadavg())}
        print(json.dumps(out, indent=1))
        L = section(out)
    if a.out:
        splice_section(a.out, L, HEAD)
    print("\n".join(L), file=sys.stderr)


if __name__ == "__main__":
    main()
