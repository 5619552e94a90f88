"""bench/torch_diagnose_section.py: BENCHMARKS.md's "## Diagnosing a PyTorch DataLoader" section from
bench/torch_diagnose.py's JSON (bench/run calls section(); nothing here needs torch or sluice)."""

def section(td):
    """The "## Diagnosing a PyTorch DataLoader" section of BENCHMARKS.md from this script's JSON (bench/run)."""
    def f(x, nd):
        return "-" if x is None else ("%%.%df" % nd) % x
    L = ["## Diagnosing a PyTorch DataLoader (`bench/torch_diagnose.py`)\n",
         "`sluice.torch.diagnose(loader, seconds=%s)` on planted loaders (`bench/torch_planted.py`) and the imagenet "
         "PIL loader (torchvision ImageFolder over the suite's JPEGs, RandomResizedCrop(224), flip, ToTensor, Normalize, "
         "batches of %d, num_workers=2 as given)%s. What it recommends (the proposal it measured faster than the "
         "settings as given, else those settings: \"no change helps here\") measured against a num_workers (0..%d) x "
         "prefetch_factor (2, 4) grid and against the loader as given, every point in alternating rounds (%d, %s s "
         "each, medians); torch %s; load average %s before. Rates in batches/s. Targets (issue 48): recommended >= 0.9 "
         "of the grid's best and >= 1.0 of the loader as given; predicted within 20%% of measured.\n" % (
             f(td["diag_seconds"], 0), td.get("batch", 64), ", beside one steady CPU hog" if td.get("hog") else "",
             td.get("max_workers") or td["cores"] + 1, td["rounds"], f(td["seconds"], 0), td["torch"], f(td.get("load_before"), 1)),
         "| loader | planted | named | proposed (workers) | check: measured / given (predicted) | recommended "
         "(workers, prefetch) | measured | as given | best grid point | recommended / best | recommended / given | "
         "predicted / measured | diagnose wall s | tracing cost |",
         "| --- | --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, o in td["loaders"].items():
        r, b, c = o["recommended"], o["best"], o.get("check") or {}
        L.append("| %s | %s | %s | %s | %s (%s) | %d, %d%s | %s | %s | %s (%d, %d) | %s | %s | %s | %s | %.0f%% |" % (
            name, o["planted"] or "-", o["named"], (o.get("proposal") or {}).get("num_workers", "-"),
            f(c.get("measured_gain"), 2), f(c.get("predicted_gain"), 2), r["num_workers"], r["prefetch_factor"],
            "" if o.get("changed") else " (as given)", f(o["recommended_measured"], 1), f(o.get("as_given"), 1),
            f(b["batches_per_s"], 1), b["num_workers"], b["prefetch_factor"], f(o["recommended_over_best"], 2),
            f(o.get("recommended_over_given"), 2), f(o["predicted_over_measured"], 2), f(o.get("diagnose_wall"), 0),
            100 * o["tracing"]["cost"]))
    im = td["loaders"].get("imagenet", {})
    z = im.get("tuned_from_zero")
    if z:
        L.append("\nThe imagenet loader misconfigured with num_workers=0, given to `sluice.torch.tuned()` (%d "
                 "workers): %s -> %s batches/s, %sx.\n" % (z["num_workers"], f(z["zero"], 2), f(z["tuned"], 2),
                                                           f(z["speedup"], 2)))
    sp = im.get("sluice_spec")
    if sp:
        L.append("Its translated sluice spec (`report.pipeline()`, planned by `optimize`): %s batches/s measured "
                 "(%s predicted) against the loader's best grid point %s: %sx; diagnose's own measured figure: %sx "
                 "the loader as given.\n" % (f(sp["measured"], 2), f(sp["predicted"], 2), f(sp["loader_best"], 2),
                                             f(sp["over_loader_best"], 2), f(sp.get("diagnose_says"), 2)))
    return L

