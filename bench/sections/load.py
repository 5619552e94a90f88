"""bench/sections/load.py: the diagnosis beside other load (issue 35): load_bench.py and its section."""
import json, os, statistics, sys

from sections.base import TOP, fmt, log, run_cmd


def bench_load(sluice, quick):
    out, err, rc = run_cmd([sys.executable, os.path.join(TOP, "bench/load_bench.py"), sluice] + (["--quick"] if quick else []),
                           timeout=3600)
    if rc:
        log("load_bench failed: %s" % err.strip()[-300:])
        return None
    return json.loads(out.strip().splitlines()[-1])


def load_report(ld):
    L = ["## The diagnosis beside other load (issue 35)\n",
         "`bench/load_bench.py`: each pipeline traced for %d s (`sluice trace --repeat`; where that saw too few elements "
         "to name a bottleneck, 3x then 6x longer, as `sluice analyze` says to) alone, beside one and beside "
         "two CPU hogs (`yes > /dev/null`), in turn; the op `sluice analyze` names as the bottleneck, its share of the "
         "pipeline's CPU, and the cores the analysis counts on.\n" % ld["seconds"],
         "| pipeline | alone | beside 1 hog | beside 2 hogs | same op | cores counted on (0/1/2 hogs) |",
         "| --- | --- | --- | --- | :---: | --- |"]
    for n, row in ld["pipelines"].items():
        cells = []
        for k in ("0", "1", "2"):
            c = row[k]
            cells.append("error: %s" % " ".join(c["error"]) if "error" in c else "%s %s (%s%% of CPU)" % (
                c["bottleneck"], c["label"], fmt(100 * (c["cpu_share"] or 0), 0)))
        cores = "/".join(fmt(row[k].get("cores_left"), 1) if "error" not in row[k] else "-" for k in ("0", "1", "2"))
        L.append("| %s | %s | %s | %s | %s | %s |" % (n, cells[0], cells[1], cells[2], "yes" if row["same"] else "**no**",
                                                   cores))
    o = ld.get("optimize") or {}
    busy, quiet = o.get("beside_one_hog") or {}, o.get("alone") or {}
    if "measured" in busy and "measured" in quiet:
        a, b = o.get("busy_plan_alone") or [], o.get("quiet_plan_alone") or []
        ra = statistics.median([x / y for x, y in zip(a, b) if x and y]) if a and b else float("nan")
        runs = [r for r in (o.get("beside_one_hog_runs") or [busy]) if r.get("predicted") and "measured" in r]
        each = "; ".join("predicted %s on %s cores (%s), measured %s: %+.1f%%" % (
            fmt(r["predicted"]), fmt(r.get("predicted_cores"), 2),
            "left the plan in its measured run" if r.get("predicted_cores_from") == "measured run" else
            "left during the trace", fmt(r["measured"]), 100 * (r["measured"] / r["predicted"] - 1)) for r in runs)
        L += ["",
              "`sluice optimize` of %s beside one hog, %d runs (target: measured within 15%% of predicted): %s. "
              "The cores the hog left the input during its trace: %s. The plan made beside the hog (the first run's), "
              "run alone afterwards, against the plan made alone: %s x (alternating, target >= 0.95).\n" % (
                  o["pipeline"], len(runs), each,
                  ", ".join(fmt(r.get("trace_cores", r.get("predicted_cores")), 2) for r in runs), fmt(ra, 2))]
    L.append("")
    return L
