"""bench/sections/prov.py: the provenance section from bench/prov_bench.sh's JSON (issues 6 and 7)."""
from sections.base import fmt, pct


PROV_BACKENDS = (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"))


PAPER_PIPELINES = 3000


def prov_report(pv):
    """The "## Provenance" section from bench/prov_bench.sh's JSON: the recording rate, then the analytics of each
    backend's corpus, each a table of figure | value | target (targets from issues 6 and 7 and the paper)."""
    L = ["## Provenance\n"]
    L.append("From `bench/prov_bench.sh SLUICE %s` (method: `docs/benchmarks.md`). Load average at start / end: %s / %s "
             "(the machine is shared).\n" % (pv.get("mode", "?"), " ".join(pv["load_average"][0]) or "-",
                                             " ".join(pv["load_average"][1]) or "-"))
    rec = pv.get("record") or {}
    if rec:
        L.append("Recording: each execution is one transaction (the execution, two artifacts, an INPUT and an OUTPUT "
                 "event with two-step paths, three properties, one association); P processes write one store at once.%s\n"
                 % (" Server: %s, the throw-away server of `tools/pg_start.sh` on loopback." % pv["postgresql_server"]
                    if pv.get("postgresql_server") else ""))
        L.append("| figure | value | target |")
        L.append("| --- | ---: | ---: |")
        for be, name in PROV_BACKENDS:
            r = rec.get(be)
            if not r:
                continue
            for w in r["writers"]:
                L.append("| %s, %d writer process%s x %s executions, executions/s (median of %d) | %s | |" % (
                    name, w["processes"], "" if w["processes"] == 1 else "es", fmt(r["executions_per_process"], 0),
                    r["rounds"], fmt(w["executions_per_second"], 0)))
        L.append("")
    for be, name in PROV_BACKENDS:
        a = (pv.get("analytics") or {}).get(be)
        if not a:
            continue
        paper = a["pipelines"] >= PAPER_PIPELINES
        L.append("### Analytics on %s: %s pipelines x %d days (seed %d)%s\n" % (
            name, fmt(a["pipelines"], 0), a["days"], a["seed"], ", paper scale" if paper else ""))
        L.append("| figure | value | target |")
        L.append("| --- | ---: | ---: |")
        L.append("| graphlets (trained models) | %s | %s |" % (fmt(a.get("graphlets"), 0), "~450,000" if paper else ""))
        L.append("| executions / artifacts / events | %s / %s / %s | |" % (
            fmt(a.get("executions"), 0), fmt(a.get("artifacts"), 0), fmt(a.get("events"), 0)))
        steps = a.get("steps", {})
        for st in ("gen", "graphlets", "waste", "train", "simulate"):
            if st in steps:
                L.append("| `sluice prov %s`: wall s, CPU s, peak RSS MiB | %s, %s, %s | |" % (
                    st, fmt(steps[st]["wall_s"]), fmt(steps[st].get("cpu_s")), fmt(steps[st]["peak_rss_mb"], 0)))
            else:
                L.append("| `sluice prov %s` | did not run | |" % st)
        if steps:
            # Issue 19's targets at paper scale: the whole chain in 3 min on SQLite, 10 min on PostgreSQL.
            L.append("| all five steps: wall s | %s%s | %s |" % (fmt(a["total_s"]), "" if a.get("complete") else " (incomplete)",
                                                              ("<= 180" if be == "sqlite" else "<= 600") if paper else ""))
            if a.get("total_cpu_s") is not None:
                L.append("| all five steps: CPU s (user + system; PostgreSQL's server not counted) | %s | |" % fmt(a["total_cpu_s"]))
            L.append("| all five steps: peak RSS MiB | %s | %s |" % (fmt(a["peak_rss_mb"], 0), "<= 4,096" if paper else ""))
        L.append("| graphlets that never pushed | %s | > 30%% (paper) |" % pct(a.get("never_pushed_share")))
        L.append("| wasted compute (executions of no pushing graphlet) | %s | |" % pct(a.get("wasted_share")))
        if a.get("roc_auc") is not None:
            L.append("| predictor ROC-AUC / PR-AUC (train %s earliest, test %s later graphlets) | %s / %s | |" % (
                fmt(a.get("train_graphlets"), 0), fmt(a.get("test_graphlets"), 0), fmt(a["roc_auc"], 3), fmt(a.get("pr_auc"), 3)))
        for key, what in (("prune_recall99", "pruning: wasted compute saved keeping push recall >= 99% and freshness"),
                          ("prune_fresh", "pruning: largest saving keeping freshness"),
                          ("ceiling_recall99", "ceiling (true probabilities): saved keeping recall >= 99% and freshness")):
            r = a.get(key)
            if r:
                L.append("| %s (threshold %.2f: recall %s, cadence %s, staleness %sx) | %s | |" % (
                    what, r["threshold"], pct(r["push_recall"], 2), pct(r["cadence"], 2), fmt(r["staleness_ratio"], 3),
                    pct(r["saved_share"])))
        L.append("")
    for n in pv.get("notes") or []:
        L.append("Note: %s.\n" % n)
    for e in pv.get("errors") or []:
        L.append("**Failed**: %s\n" % e)
    return L
