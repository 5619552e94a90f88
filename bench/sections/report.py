"""bench/sections/report.py: BENCHMARKS.md: the report of a whole run (the sections' own reports spliced in where they
have them)."""
import json

from sections.base import ROUNDS, ROUND_SPREAD, TUNER_WARMUP, fmt, med_range, pct, ratio, spread
from sections.pytorch import torch_diagnose_report
from sections.peers import peers_report
from sections.mpi import mpi_report
from sections.prov import prov_report


def write_report(path, m, results, extra, quick):
    L = []
    L.append("# sluice benchmarks\n")
    L.append("Written by `bench/run%s` (`make bench%s`); every figure below comes from that run. Protocol: "
             "`../shared/docs/benchmarks.md` and `docs/benchmarks.md`.\n" % (" --quick" if quick else "", "-quick" if quick else ""))
    if quick:
        L.append("**Quick smoke run (`--quick`): tiny data and very short runs; these figures are not meaningful.**\n")
    L.append("Machine: %d cores (%d usable), %s MB memory, %s, Linux %s. Date: %s. Commit: %s.\n" % (
        m["cores"], m["affinity"], fmt(m["memory_mb"], 0), m["cpu"], m["kernel"], m["date"], m["commit"]))
    L.append("Throughput is examples per second after warm-up (median of a pipeline's alternating rounds: %d to %d); CPU "
             "is CPU seconds (user+system, all threads) per example; RSS is the peak resident set of the process.\n"
             % ROUNDS[0 if quick else 1])
    summary = []
    tcost = []
    for r in results:
        c = r["configs"]
        L.append("## %s\n" % r["name"])
        L.append("| configuration | examples/s | vs naive | CPU ms/example | peak RSS MB |")
        L.append("| --- | ---: | ---: | ---: | ---: |")
        base = c["naive"]["examples_per_second"]
        for k in ["naive", "heuristic", "autotune", "tuner", "sluice", "grid", "sluice-untraced"]:
            if k not in c:
                continue
            v = c[k]
            L.append("| %s | %s | %s | %s | %s |" % (k, fmt(v["examples_per_second"]), fmt(ratio(v["examples_per_second"], base), 2),
                                                 fmt(v["cpu_per_example"] * 1000, 2), fmt(v["peak_rss_mb"], 0)))
        b = r["bound"] * r["batch"] if r["bound"] else None
        p = r["predicted"] * r["batch"] if r["predicted"] else None
        L.append("| bound (LP) | %s | | | |" % fmt(b))
        L.append("")
        gb = r["grid_best"]
        L.append("Grid best: parallelism %s, prefetch %s%s (of %d points). `sluice optimize`: predicted %s examples/s, "
                 "limit '%s', %s round(s)%s.\n" % (gb["parallelism"], gb["prefetch"] or "none", ", cache" if gb.get("cache") else "",
                                                   len(r["grid"]), fmt(p), r["optimize"].get("limit", "-"), r["optimize"].get("rounds", "-"),
                                                   "; kept the input's own configuration (it measured faster than every plan)"
                                                   if r["optimize"].get("kept_input") else ""))
        tcost.append((r["name"], r.get("trace_cost")))
        pr = r.get("paired") or {}
        runs = c["sluice"]["runs"]
        # The machine's speed in these runs against optimize's: the same spec's CPU per example in both (optimize's
        # from its final alternating runs). For a CPU-limited plan the prediction at these runs' speed is the
        # prediction times optimize's / these runs' CPU per example.
        ocpu = (r["optimize"].get("measured_cpu_per_element") or 0) / max(r["batch"], 1)
        bcpu = c["sluice"]["cpu_per_example"]
        speed = ocpu / bcpu if ocpu > 0 and bcpu > 0 else None
        summary.append((r["name"], r.get("rounds", len(runs)), med_range(pr.get("sluice/naive", [])),
                        med_range(pr.get("sluice/autotune", [])), med_range(pr.get("sluice/grid", [])),
                        med_range([ratio(x, b) for x in runs]), med_range([ratio(p, x) for x in runs]),
                        "%s (%+.0f%%)" % (fmt(ratio(p, c["sluice"]["examples_per_second"]) * speed, 2), 100 * (1 / speed - 1))
                        if speed and ratio(p, c["sluice"]["examples_per_second"]) else "-",
                        med_range(pr.get("sluice/sluice-untraced", [])), spread(runs), spread(c["sluice-untraced"]["runs"])))
    t = extra.get("torch")
    inet = next((r for r in results if r["name"] == "imagenet"), None)
    if t:
        L.append("## PyTorch DataLoader (imagenet pipeline)\n")
        L.append("torch %s; PIL decode, RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize, batch 64, on "
                 "the same TFRecord files.\n" % t["torch"])
        L.append("| num_workers | images/s |")
        L.append("| ---: | ---: |")
        for a in t["all"]:
            L.append("| %d | %s |" % (a["workers"], fmt(a["images_per_second"])))
        L.append("")
    L.append("## Summary of ratios\n")
    L.append("Each ratio is the median over rounds of the two configurations' runs in the same round, with the smallest "
             "and largest round in brackets (sluice/bound and predicted/measured: each `sluice` run against the one "
             "bound or prediction). Rounds: at least %d; more, up to %d, while a ratio's rounds or the sluice runs were "
             "more than %.0f%% apart. A target met by the median but not by the whole range is met within this "
             "machine's noise, no better. \"at these runs' speed\": the prediction (made during `sluice optimize`) "
             "times optimize's CPU per example of the same spec over these runs' (in brackets: how much more CPU per "
             "example these runs spent, i.e. how much slower the machine ran them; this VM's speed moves 10-50%% "
             "within minutes); the target is on predicted/measured, this says how much of a miss the machine's speed "
             "explains.\n" % (ROUNDS[0 if quick else 1][0], ROUNDS[0 if quick else 1][1], 100 * ROUND_SPREAD))
    L.append("| pipeline | rounds | sluice/naive | sluice/autotune | sluice/grid | sluice/bound | predicted/measured "
             "| at these runs' speed | traced/untraced | spread of runs: traced / untraced |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in summary:
        L.append("| %s | %d | %s | %s / %s |" % (row[0], row[1], " | ".join(row[2:9]), pct(row[9]), pct(row[10])))
    if any("tuner" in r["configs"] for r in results):
        L.append("\nThe online tuner (`run --tuner sluice` on the spec with every knob \"autotune\", measured after %.0f s of "
                 "tuning; issue 17's targets: >= 0.95x the offline plan within 20 s, >= the AUTOTUNE baseline):\n"
                 % TUNER_WARMUP[0 if quick else 1])
        L.append("| pipeline | tuner, examples/s | tuner / sluice optimize | tuner / autotune | target | what the tuner did (each run) |")
        L.append("| --- | ---: | ---: | ---: | ---: | --- |")
        for r in results:
            c = r["configs"]
            if "tuner" not in c:
                continue
            tv = c["tuner"]["examples_per_second"]
            pr = r.get("paired") or {}
            L.append("| %s | %s | %s | %s | >= 0.95 / >= 1.0 | %s |" % (r["name"], fmt(tv), med_range(pr.get("tuner/sluice", [])),
                                                                 med_range(pr.get("tuner/autotune", [])),
                                                                 " / ".join(c["tuner"].get("stories", []))))
    L.append("\nSpread of runs: (largest - smallest) / median of the runs of that configuration. A traced/untraced "
             "ratio whose distance from 1 is within the spread is noise, not tracing cost: the twins measurement below "
             "resolves that cost (sampled timing is designed to stay near 0.25% of each op's time, docs/trace-format.md).")
    if any(x for _, x in tcost):
        L.append("\n### Tracing cost (`trace_cost`: traced and untraced twins in one thread)\n")
        L.append("The naive (synchronous) spec twice in one thread, one with sampled timing and one without, taking "
                 "turns in 20 ms slices (A B B A ...) and making the same elements; each slice's thread CPU is "
                 "charged to its twin. Drifts of the machine hit both alike, so this resolves what separate runs "
                 "cannot. Cost = traced CPU / untraced CPU - 1: the median over slice pairs (quartiles of the pairs), "
                 "and of the totals.\n")
        L.append("| pipeline | cost (median pair) | quartiles of pairs | cost of totals | slice pairs | target |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: |")
        for n, x in tcost:
            if x:
                L.append("| %s | %s | %s .. %s | %s | %d | <= 2%% |" % (n, pct(x["cost"], 2), pct(x["cost_q1"], 1),
                         pct(x["cost_q3"], 1), pct(x["cost_of_totals"], 2), x["slices"] // 2))
    if t and inet:
        L.append("\nsluice/PyTorch on imagenet (both on all %d cores): %s (sluice %s images/s; PyTorch best %s images/s "
                 "with num_workers=%d).\n" % (m["affinity"], fmt(ratio(inet["configs"]["sluice"]["examples_per_second"],
                                             t["best"]["images_per_second"]), 2), fmt(inet["configs"]["sluice"]["examples_per_second"]),
                                             fmt(t["best"]["images_per_second"]), t["best"]["workers"]))
    t420, dr = extra.get("torch_420"), extra.get("decode_ratio")
    if t420 and dr and dr["420"].get("plan_f32_eps"):
        L.append("sluice/PyTorch on imagenet with 4:2:0 JPEGs: %s (sluice %s images/s: the plan on those files, median of "
                 "the CPU-per-image section's %s s runs; PyTorch best %s images/s with num_workers=%d).\n" % (
                     fmt(ratio(dr["420"]["plan_f32_eps"], t420["best"]["images_per_second"]), 2), fmt(dr["420"]["plan_f32_eps"]),
                     "1.5" if quick else "6", fmt(t420["best"]["images_per_second"]), t420["best"]["workers"]))
    tssd = extra.get("torch_ssd")
    sres = next((r for r in results if r["name"] == "ssd"), None)
    if tssd and sres:
        L.append("sluice/PyTorch on ssd (PIL decode, Resize((300, 300)), boxes padded to 100 and flipped with the image, "
                 "ToTensor, Normalize, batch 32; same TFRecord files): %s (sluice %s images/s; PyTorch best %s images/s "
                 "with num_workers=%d).\n" % (fmt(ratio(sres["configs"]["sluice"]["examples_per_second"], tssd["best"]["images_per_second"]), 2),
                                             fmt(sres["configs"]["sluice"]["examples_per_second"]), fmt(tssd["best"]["images_per_second"]),
                                             tssd["best"]["workers"]))
    py = extra.get("python")
    if py:
        L.append("## Python (`bench/python_bench.py`)\n")
        L.append("The tuned spec iterated from Python into torch tensors (`sluice.Pipeline` + `torch.from_numpy`) against "
                 "`sluice run` of the same spec, separate processes taking turns, medians of %d; torch %s.\n" % (py["reps"], py["torch"]))
        L.append("| pipeline | sluice run, examples/s | Python, examples/s | Python / CLI | target |")
        L.append("| --- | ---: | ---: | ---: | ---: |")
        for n in ("imagenet", "tabular"):
            if n in py:
                o = py[n]
                L.append("| %s | %s | %s | %s | %s |" % (n, fmt(o["cli_examples_per_second"]), fmt(o["python_examples_per_second"]),
                                                        fmt(o["ratio"], 3), ">= 0.97" if n == "imagenet" else "reported"))
        tr = py["train"]
        L.append("\nA training loop whose step takes %s ms without CPU (an emulated accelerator) on the imagenet "
                 "pipeline: sluice.torch.Dataset (spec optimized with consumer_cores=1) against DataLoader with the "
                 "PIL/torchvision peer.\n" % fmt(tr["step_ms"], 0))
        L.append("| input | steps/s | share of time waiting for input |")
        L.append("| --- | ---: | ---: |")
        L.append("| sluice.torch.Dataset | %s | %s |" % (fmt(tr["sluice_median"]["steps_per_second"], 2), pct(tr["sluice_median"]["wait_share"])))
        for w, v in sorted(tr["dataloader_median"].items()):
            L.append("| DataLoader num_workers=%s | %s | %s |" % (w, fmt(v["steps_per_second"], 2), pct(v["wait_share"])))
        if tr.get("ratio"):
            L.append("\nsluice / DataLoader's best (num_workers=%d): %s (target >= 1.3).\n" % (tr["dataloader_best"]["workers"], fmt(tr["ratio"], 2)))
        elif tr.get("dataloader_skipped"):
            L.append("\nDataLoader peer skipped: %s.\n" % tr["dataloader_skipped"])
    if extra.get("torch_diagnose"):
        L.extend(torch_diagnose_report(extra["torch_diagnose"]))
    if extra.get("peers"):
        L.extend(peers_report(extra["peers"], m))
    s4 = extra.get("spin4")
    if s4:
        pr = s4["optimize"].get("predicted")
        L.append("## Planted bottleneck: spin4 (`docs/planner.md`)\n")
        L.append("4 spin stages of 10, 100, 10 and 10 us per element on %d cores, as written (all on one thread) and as "
                 "`sluice optimize` planned it; medians of 3 alternating runs.\n" % m["affinity"])
        L.append("| figure | value | target |")
        L.append("| --- | ---: | ---: |")
        L.append("| as written, elements/s | %s | |" % fmt(s4["naive"]))
        L.append("| optimized, elements/s | %s | |" % fmt(s4["tuned"]))
        L.append("| optimized / as written | %s | >= 1.8 |" % fmt(ratio(s4["tuned"], s4["naive"]), 2))
        L.append("| predicted, elements/s | %s | |" % fmt(pr))
        L.append("| predicted / measured | %s | within 0.90-1.10 |" % fmt(ratio(pr, s4["tuned"]), 2))
        bd = s4["optimize"].get("bound")
        if bd:
            L.append("| bound (LP), elements/s | %s | |" % fmt(bd))
            L.append("| optimized / bound | %s | <= 1.03 |" % fmt(ratio(s4["tuned"], bd), 2))
        L.append("")
    e = extra.get("engine")
    if e:
        L.append("## Engine overhead (`engine_bench`)\n")
        L.append("| figure | value | target |")
        L.append("| --- | ---: | ---: |")
        L.append("| range -> map(identity) -> batch(256), ns/element | %s | <= 100 |" % fmt(e["sync_chain_ns"]))
        L.append("| the same loop written directly in C, ns/element | %s | |" % fmt(e["direct_ns"]))
        L.append("| parallel map hand-off (parallelism 2 minus sequential map), ns/element | %s | <= 1000 |" % fmt(e["parallel_handoff_ns"]))
        L.append("| prefetch hand-off, ns/element | %s | |" % fmt(e["prefetch_ns"]))
        L.append("| RSS at 10%% / at the end of %sM elements (parallel map, shuffle 10k, prefetch), MB | %s / %s | flat |" % (
            fmt(e.get("rss_elements", 10000000) / 1e6, 0), fmt(e["rss_1m_kb"] / 1024), fmt(e["rss_10m_kb"] / 1024)))
        L.append("")
    dr = extra.get("decode_ratio")
    if dr:
        L.append("## CPU per image against a bare decode (imagenet)\n")
        L.append("The plan `sluice optimize` wrote for imagenet (float32 normalized 224x224 crops, random flip, batches "
                 "of 64), on the suite's JPEGs and on the same images with 4:2:0 chroma (`sluice gen --chroma 420`): CPU "
                 "per image, all threads, marginal between a %s s and a %s s run after the same warm-up (median of %d); "
                 "against `fns_bench`'s bare TurboJPEG decode loop over the same files (one core, CPU per image). "
                 "uint8: the same plan with the fused op's normalize off (uint8 HWC output).\n" % (
                     "0.5" if quick else "2", "1.5" if quick else "6", dr["444"]["runs"]))
        L.append("| chroma | plan, CPU ms/image | bare decode, CPU ms/image | plan / bare decode | target | uint8 output, CPU ms/image | uint8 / bare |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for ch, name in (("444", "4:4:4"), ("420", "4:2:0")):
            r = dr[ch]
            L.append("| %s | %s | %s | %s | <= 1.25 | %s | %s |" % (name, fmt(r["plan_f32_cpu_ms"], 3), fmt(r["bare_cpu_ms"], 3),
                     fmt(r["ratio_f32"], 2), fmt(r["plan_u8_cpu_ms"], 3), fmt(r["ratio_u8"], 2)))
        L.append("")
    ds = extra.get("decode_ratio_ssd")
    if ds:
        L.append("On ssd (boxes; the plan `sluice optimize` wrote for it in this run, float32 300x300, batches of 32; "
                 "JPEGs of about 400x350 resized, so no DCT scaling helps): plan %s CPU ms/image, bare decode %s, "
                 "plan / bare decode %s (reported; marginal, median of %d).\n" % (
                     fmt(ds["plan_cpu_ms"], 3), fmt(ds["bare_cpu_ms"], 3), fmt(ds["ratio"], 2), ds["runs"]))
    f = extra.get("fns")
    if f:
        L.append("## JPEG functions (`fns_bench`, one core)\n")
        L.append("```\n%s\n```\n" % json.dumps(f, indent=1))
    pv = extra.get("prov")
    if pv:
        L.extend(prov_report(pv))
    mp = extra.get("mpi")
    if mp:
        L.extend(mpi_report(mp, m))
    open(path, "w").write("\n".join(L) + "\n")
