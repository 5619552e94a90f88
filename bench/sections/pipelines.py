"""bench/sections/pipelines.py: the suite pipelines (issue 17): the spec rewrites for each configuration (naive,
heuristic, autotune, grid, cache), their alternating rounds and paired ratios, and the planted spin4 bottleneck."""
import copy, json, os, re

from sections.base import ROUNDS, ROUND_SPREAD, TOP, TUNER_WARMUP, log, measure, median_of, spread


def walk_ops(ops):
    for op in ops:
        yield op
        if "source" in op:
            yield from walk_ops(op["source"])


def with_data(spec, quick):
    """The suite spec on the benchmark's data, made endless so a measurement never hits the end of the data: a
    repeat after the files op, or, where the spec already repeats a deterministic prefix (imagenet-cacheable),
    that repeat made infinite (so the prefix stays finite and cacheable)."""
    s = json.dumps(spec)
    if quick:
        s = re.sub(r'"bench/data/([a-z]+)/', r'"bench/data/\1-quick/', s)
    s = json.loads(s)
    reps = [o for o in s["ops"] if o["op"] == "repeat"]
    if reps:
        for o in reps:
            o.pop("count", None)
    else:
        i = next(k for k, o in enumerate(s["ops"]) if o["op"] == "files")
        s["ops"].insert(i + 1, {"op": "repeat"})
    return s


def naive(spec):
    s = copy.deepcopy(spec)
    s["ops"] = [o for o in s["ops"] if o["op"] != "prefetch"]
    for o in walk_ops(s["ops"]):
        if "parallelism" in o:
            o["parallelism"] = 1
        if o["op"] in ("map", "interleave") and "buffer" in o:
            del o["buffer"]
        if o["op"] == "interleave" and o.get("cycle_length") == "autotune":
            o["cycle_length"] = 1
    return s


def heuristic(spec, cores):
    s = copy.deepcopy(spec)
    s["ops"] = [o for o in s["ops"] if o["op"] != "prefetch"]
    for o in walk_ops(s["ops"]):
        if o["op"] in ("map", "interleave"):
            o["parallelism"] = cores
            o.pop("buffer", None)
    s["ops"].append({"op": "prefetch", "buffer": 1})
    return s


def autotuned(spec):
    """Every tunable knob handed to the online tuner (maps and interleaves, and the final prefetch)."""
    s = copy.deepcopy(spec)
    for o in walk_ops(s["ops"]):
        if o["op"] in ("map", "interleave"):
            o["parallelism"] = "autotune"
        if o["op"] == "prefetch":
            o["buffer"] = "autotune"
    if not any(o["op"] == "prefetch" for o in s["ops"]):
        s["ops"].append({"op": "prefetch", "buffer": "autotune"})
    return s


def grid_points(spec, cores, quick):
    """The grid: one parallelism P for every map and interleave, P in {1, 2, 4} (1 and 2 in quick), x a final
    prefetch of 0 (none) or 4, x (cacheable pipelines only) with or without a cache after the deterministic prefix.
    A patient human's search over the knobs that matter, small enough to run exhaustively."""
    ps = [1, 2] if quick else sorted(set([1, 2, 4, cores]))
    points = []
    cache_at = cache_point(spec)
    for p in ps:
        for pf in (0, 4):
            for cache in ([False, True] if cache_at is not None else [False]):
                s = copy.deepcopy(spec)
                s["ops"] = [o for o in s["ops"] if o["op"] != "prefetch"]
                for o in walk_ops(s["ops"]):
                    if o["op"] in ("map", "interleave"):
                        o["parallelism"] = p
                        o.pop("buffer", None)
                    if o["op"] == "interleave" and o.get("cycle_length") == "autotune":
                        o["cycle_length"] = 4
                if cache:
                    s["ops"].insert(cache_point(s), {"op": "cache"})
                if pf:
                    s["ops"].append({"op": "prefetch", "buffer": pf})
                points.append(({"parallelism": p, "prefetch": pf, "cache": cache}, s))
    return points


def cache_point(spec):
    """Index after the last op of the deterministic prefix, when a repeat follows it (the cacheable pipeline)."""
    for i, o in enumerate(spec["ops"]):
        if o["op"] == "repeat":
            return i
    return None


def run_spec(sluice, spec_path, seconds, warmup, extra=(), env=None):
    out, cpu, rss = measure([sluice, "run", spec_path, "--seconds", str(seconds), "--warmup", str(warmup), "--warmup-caches", "--json",
                             "--quiet"] + list(extra), env=env)
    r = json.loads(out.strip().splitlines()[-1])
    if r.get("status") != "ok":
        raise SystemExit("bench: run of %s ended with status %s" % (spec_path, r.get("status")))
    el = max(r["examples"], 1)
    # The process CPU of the measured window (run's cpu_seconds), not of the whole process: a warm-up (12 s for the
    # online tuner) would otherwise be charged to the examples measured after it.
    return {"eps": r["examples_per_second"], "bps": r["elements_per_second"], "cpu_per_example": r.get("cpu_seconds", cpu) / el,
            "rss_kb": rss, "examples": r["examples"], "tuner_changes": r.get("tuner_changes"), "tuner_fused": r.get("tuner_fused")}


def tuner_story(changes, fused, warmup):
    """What the online tuner did in one run, in a few words: fusion, the trial's outcome, reverts, changes made
    during the measured window (after `warmup` s), the knobs it ended on."""
    if changes is None:
        return ""
    words = []
    if fused:
        words.append("fused")
    trial = [c for c in changes if c["reason"].startswith("trial:")]
    back = [c for c in changes if c["reason"].startswith("trial reverted")]
    solved = [c for c in trial if "solved on its window" in c["reason"]]
    if solved:  # the wording of plan_tune.c's seq_solve says which side won the trial
        won = "knobs of the trial" in solved[0]["reason"]
        words.append("trial %s, solved on its window at %.1f s" % ("kept" if won else "lost", solved[0]["t"]))
    elif trial:
        words.append("trial %s at %.1f s" % ("reverted" if back else "kept", back[0]["t"] if back else trial[0]["t"]))
    rev = {round(c["t"], 2) for c in changes if c["reason"].startswith("reverted")}
    if rev:
        words.append("%d revert%s" % (len(rev), "s" if len(rev) > 1 else ""))
    if any(c["knob"] == "cache" for c in changes):
        words.append("cache inserted")
    late = {round(c["t"], 2) for c in changes if c["t"] > warmup}
    if late:
        words.append("%d change%s while measured" % (len(late), "s" if len(late) > 1 else ""))
    final = {}
    for c in changes:
        if c["knob"] != "cache":
            final[(c["op"], c["knob"])] = c["to"]
    if final:
        words.append("ended " + ", ".join("%s %s %d" % (op, "par" if k == "parallelism" else "buf", v)
                                          for (op, k), v in sorted(final.items())))
    return "; ".join(words) if words else "no change"


# The ratios issue 17 sets targets on, taken within each round: the two runs of a pair are at most one round
# (about 40 s) apart, so a drift of the machine slower than that cancels, which a ratio of two medians does not do.
PAIRS = [("sluice", "naive"), ("sluice", "autotune"), ("sluice", "grid"), ("tuner", "sluice"), ("tuner", "autotune"),
         ("sluice", "sluice-untraced")]


# The ones with a target near 1 (and the plan's own runs, for predicted/measured and the bound) decide the rounds;
# traced/untraced is settled by trace_cost, sluice/naive is far from 1.
SETTLE = ("sluice/autotune", "sluice/grid", "tuner/sluice", "tuner/autotune")


def paired_ratios(runs):
    return {"%s/%s" % (a, b): [x["eps"] / y["eps"] for x, y in zip(runs[a], runs[b]) if y["eps"]] for a, b in PAIRS}


def bench_pipeline(sluice, name, cores, quick, workdir):
    spec = with_data(json.load(open(os.path.join(TOP, "bench/pipelines/%s.json" % name))), quick)
    seconds, warmup = (1.0, 0.3) if quick else (3.0, 1.0)
    paths = {}

    def save(tag, s):
        p = os.path.join(workdir, "%s.%s.json" % (name, tag))
        json.dump(s, open(p, "w"), indent=1)
        paths[tag] = p
        return p

    save("naive", naive(spec))
    save("heuristic", heuristic(spec, cores))
    save("autotune", autotuned(spec))
    # sluice: the optimizer's own spec, from the spec with every knob on "autotune"
    tuned = os.path.join(workdir, "%s.sluice.json" % name)
    log("%s: sluice optimize" % name)
    out, cpu, rss = measure([sluice, "optimize", paths["autotune"], "-o", tuned, "--json",
                             "--seconds", "3", "--measure", "1" if quick else "3"])
    opt = json.loads(out.strip().splitlines()[-1])
    paths["sluice"] = tuned
    # grid: one short run per point, then the best point joins the alternating measurement
    log("%s: grid" % name)
    best = None
    grid = []
    for knobs, s in grid_points(spec, cores, quick):
        p = save("grid-%d" % len(grid), s)
        r = run_spec(sluice, p, seconds * 0.6, warmup)
        grid.append({"knobs": knobs, "eps": r["eps"]})
        if best is None or r["eps"] > best[1]:
            best = (p, r["eps"], knobs)
    paths["grid"] = best[0]
    configs = ["naive", "heuristic", "autotune", "tuner", "sluice", "grid"]
    paths["tuner"] = paths["autotune"]
    runs = {c: [] for c in configs}
    runs["sluice-untraced"] = []
    # Rounds: every configuration once, in turn. At least lo; more, up to hi, while a compared pair's per-round
    # ratios or the plan's own runs still spread over ROUND_SPREAD (this VM's speed moves 25-80% between
    # runs; a median of three cannot settle a 5% target then).
    lo, hi = ROUNDS[0 if quick else 1]
    while True:
        log("%s: alternating runs, round %d" % (name, len(runs["sluice"]) + 1))
        for c in configs:
            extra = ["--tuner", c if c == "autotune" else "sluice"] if c in ("autotune", "tuner") else []
            w = TUNER_WARMUP[0 if quick else 1] if c == "tuner" else warmup
            runs[c].append(run_spec(sluice, paths[c], seconds, w, extra))
        runs["sluice-untraced"].append(run_spec(sluice, paths["sluice"], seconds, warmup, env={"SL_NO_TIMING": "1"}))
        n = len(runs["sluice"])
        wide = [k for k, v in paired_ratios(runs).items() if k in SETTLE and (spread(v) or 0) > ROUND_SPREAD]
        if (spread([r["eps"] for r in runs["sluice"]]) or 0) > ROUND_SPREAD:
            wide.append("sluice")
        if n >= hi or (n >= lo and not wide):
            break
        if n >= lo:
            log("%s: still over %.0f%% apart: %s" % (name, 100 * ROUND_SPREAD, ", ".join(wide)))
    res = {"name": name, "optimize": opt, "grid": grid, "grid_best": best[2], "configs": {}, "rounds": len(runs["sluice"]),
           "paired": paired_ratios(runs)}
    # The tracer's cost without the noise of separate runs: traced and untraced twins of the naive (synchronous)
    # spec take turns in 20 ms slices in one thread, making the same elements (bench/trace_cost.c).
    tc = os.path.join(os.path.dirname(sluice), "trace_cost")
    if os.path.exists(tc):
        log("%s: tracing cost (twins)" % name)
        try:
            out, _, _ = measure([tc, paths["naive"], "3" if quick else "10"])
            res["trace_cost"] = json.loads(out.strip().splitlines()[-1])
        except (SystemExit, ValueError, IndexError) as e:
            log("%s: trace_cost failed: %s" % (name, e))
    for c, rs in runs.items():
        res["configs"][c] = {"examples_per_second": median_of(rs, "eps"), "cpu_per_example": median_of(rs, "cpu_per_example"),
                             "peak_rss_mb": median_of(rs, "rss_kb") / 1024, "runs": [r["eps"] for r in rs]}
        if c == "tuner":  # what it did in each run (the log itself is in the results JSON)
            w = TUNER_WARMUP[0 if quick else 1]
            res["configs"][c]["stories"] = [tuner_story(r["tuner_changes"], r["tuner_fused"], w) for r in rs]
            res["configs"][c]["changes"] = [r["tuner_changes"] for r in rs]
    res["bound"] = opt.get("bound")
    res["predicted"] = opt.get("predicted")
    # Examples per element, as the sluice configuration's runs measured them: the planner's figures are in
    # elements/s, and bucketed batches (transformer) have no fixed size.
    el = sum(r["examples"] / r["eps"] * r["bps"] for r in runs["sluice"])
    res["batch"] = sum(r["examples"] for r in runs["sluice"]) / el if el > 0 else 1
    return res


SPIN4 = {"name": "spin4", "ops": [{"op": "range", "stop": 100000000},
                                  {"op": "map", "fn": "spin", "args": {"us": 10}},
                                  {"op": "map", "fn": "spin", "args": {"us": 100}},
                                  {"op": "map", "fn": "spin", "args": {"us": 10}},
                                  {"op": "map", "fn": "spin", "args": {"us": 10}}]}


def bench_spin4(sluice, quick, workdir):
    """The planted bottleneck of docs/planner.md: 4 spin stages, one heavy, as written (all sequential) and as
    `sluice optimize` plans it, measured alternately."""
    naive_p = os.path.join(workdir, "spin4.json")
    tuned_p = os.path.join(workdir, "spin4.tuned.json")
    json.dump(SPIN4, open(naive_p, "w"))
    out, _, _ = measure([sluice, "optimize", naive_p, "-o", tuned_p, "--json", "--seconds", "1" if quick else "3",
                         "--measure", "1" if quick else "5"])
    opt = json.loads(out.strip().splitlines()[-1])
    seconds, warmup = (1.0, 0.3) if quick else (3.0, 1.0)
    runs = {"naive": [], "tuned": []}
    for _ in range(3):
        for k, p in (("naive", naive_p), ("tuned", tuned_p)):
            runs[k].append(run_spec(sluice, p, seconds, warmup))
    return {"optimize": opt, "naive": median_of(runs["naive"], "bps"), "tuned": median_of(runs["tuned"], "bps"),
            "tuned_spec": json.load(open(tuned_p))}
