#!/usr/bin/python3
"""bench/torch_diagnose.py: sluice.torch.diagnose against measurement (issue 39's targets).

For the three planted loaders (bench/torch_planted.py) and the suite's imagenet PIL loader (torchvision ImageFolder
over the bench's JPEGs, written out of its TFRecord shards; RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize, batches of 64):
  - the bottleneck diagnose names, against the planted one;
  - the recommended settings measured against a num_workers x prefetch_factor grid (every point measured in
    alternating rounds, medians), and the prediction against the measured rate of the recommended settings;
  - the tracing cost: the loader's rate while diagnose traces it against its rate untraced, alternating.
For the imagenet loader also: num_workers=0 against tuned() of it (the speed-up), and the translated sluice spec's
rate beside the loader's (the spec's own plan: Pipeline.optimize, then measured).

usage: torch_diagnose.py --files 'DIR/*.tfrecord' [--seconds S] [--diag-seconds D] [--rounds R] [--max-workers N]
                         [--only slow_step,few_workers,transfer,imagenet] [--batch B]
Needs `import sluice` (bench/run installs the package into a venv beside the build). Prints one JSON object.
"""
import argparse, glob, json, os, statistics, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import sluice.torch as st  # noqa: E402
from torch_planted import planted  # noqa: E402

# The planted bottleneck of each loader, as diagnose's bottleneck "kind" says it.
PLANTED = {"slow_step": "step", "few_workers": "too few workers", "transfer": "main process", "imagenet": None}


def rate(loader, seconds, warmup=0.5):
    """Batches/s of `loader` over `seconds` after its first batch and `warmup` more (epochs restart as needed)."""
    it = iter(loader)
    n, t0, start = 0, time.monotonic(), None
    try:
        while True:
            try:
                next(it)
            except StopIteration:
                it = iter(loader)
                continue
            now = time.monotonic()
            if start is None:
                if now - t0 >= warmup:
                    start = now
                continue
            n += 1
            if now - start >= seconds:
                return n / (now - start)
    finally:
        if hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
            if getattr(loader, "_iterator", None) is it:  # persistent workers: the next iter() starts new ones
                loader._iterator = None


def image_folder(files, root):
    """The TFRecord shards' JPEGs as root/<label>/<n>.jpg (what torchvision's ImageFolder reads)."""
    from torch_imagenet import parse_example, tfrecords
    n = 0
    for path in sorted(glob.glob(files)):
        for rec in tfrecords(path):
            ex = parse_example(rec, {"image/encoded", "image/class/label"})
            d = os.path.join(root, "%04d" % int(ex["image/class/label"]))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "%06d.jpg" % n), "wb") as f:
                f.write(ex["image/encoded"])
            n += 1
    return n


def builders(files, workdir, batch):
    def imagenet(**kw):
        import torchvision
        from torch_imagenet import pil_transform
        root = os.path.join(workdir, "folder")
        if not os.path.isdir(root):
            image_folder(files, root)
        ds = torchvision.datasets.ImageFolder(root, transform=pil_transform())
        kw.setdefault("num_workers", 2)
        return DataLoader(ds, batch_size=batch, shuffle=True, drop_last=True, **kw)

    def planted_kind(kind):
        return lambda **kw: planted(kind, scale=10, **({"workers": kw.pop("num_workers")} if "num_workers" in kw
                                                       else {}))

    return {"slow_step": planted_kind("slow_step"), "few_workers": planted_kind("few_workers"),
            "transfer": planted_kind("transfer"), "imagenet": imagenet}


def settings(loader, w, pf):
    """`loader` with num_workers w and prefetch_factor pf (same dataset, sampler, collate)."""
    from sluice.torch.loader import _loader_args, _make_loader
    over = {"num_workers": w, "persistent_workers": w > 0}
    if w > 0:
        over["prefetch_factor"] = pf
    return _make_loader(_loader_args(loader), **over)


def bench_one(name, make, a, cores):
    base = make()
    rep = st.diagnose(base, seconds=a.diag_seconds)
    d = rep.to_dict()
    rec = rep.recommended
    rw, rpf = rec["num_workers"], rec.get("prefetch_factor") or 2
    points = [(0, 2)] + [(w, pf) for w in range(1, a.max_workers + 1) for pf in (2, 4)]
    if (rw, rpf) not in points:
        points.append((rw, rpf))
    runs = {p: [] for p in points}
    traced, untraced = [], []
    for r in range(a.rounds):  # alternating: every point once per round
        for p in points:
            runs[p].append(rate(settings(base, *p), a.seconds))
        untraced.append(rate(make(), a.seconds))
        traced.append(st.diagnose(make(), seconds=a.seconds).to_dict()["measured"]["batches_per_s"])
    med = {p: statistics.median(v) for p, v in runs.items()}
    best = max(med, key=med.get)
    out = {"planted": PLANTED[name], "named": d["bottleneck"]["kind"], "words": d["bottleneck"]["words"],
           "settings": d["settings"], "recommended": {"num_workers": rw, "prefetch_factor": rpf},
           "measured_as_given": d["measured"]["batches_per_s"], "bound": d["bound"],
           "predicted": d["recommend"]["num_workers"]["predicted"], "planner_predicted": d["predicted"],
           "grid": [{"num_workers": p[0], "prefetch_factor": p[1], "batches_per_s": med[p], "runs": runs[p]}
                    for p in points],
           "best": {"num_workers": best[0], "prefetch_factor": best[1], "batches_per_s": med[best]},
           "recommended_measured": med[(rw, rpf)], "recommended_over_best": med[(rw, rpf)] / med[best],
           "predicted_over_measured": d["recommend"]["num_workers"]["predicted"] / med[(rw, rpf)],
           "tracing": {"untraced": untraced, "traced": traced,
                       "cost": 1 - statistics.median(traced) / statistics.median(untraced)}}
    if name == "imagenet":
        zero = settings(base, 0, 2)
        zr, tr = [], []
        tuned_loader = st.tuned(zero, seconds=a.diag_seconds)
        for r in range(a.rounds):
            zr.append(rate(zero, a.seconds))
            tr.append(rate(tuned_loader, a.seconds))
        out["tuned_from_zero"] = {"num_workers": tuned_loader.num_workers, "zero": statistics.median(zr),
                                  "tuned": statistics.median(tr),
                                  "speedup": statistics.median(tr) / statistics.median(zr)}
        p = rep.pipeline()
        plan = p.optimize(seconds=a.diag_seconds)
        sr = []
        for r in range(a.rounds):
            n, t0 = 0, time.monotonic()
            while time.monotonic() - t0 < a.seconds:
                for _ in p:
                    n += 1
            sr.append(n / (time.monotonic() - t0))
        out["sluice_spec"] = {"python_steps": rep.python_steps, "predicted": plan["predicted"],
                              "measured": statistics.median(sr), "loader_best": med[best],
                              "over_loader_best": statistics.median(sr) / med[best]}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--diag-seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-workers", type=int, default=0, help="grid's largest num_workers (0: cores + 1)")
    ap.add_argument("--only", default=",".join(PLANTED))
    ap.add_argument("--batch", type=int, default=64, help="the imagenet loader's batch size")
    a = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    a.max_workers = a.max_workers or cores + 1
    out = {"torch": torch.__version__, "cores": cores, "seconds": a.seconds, "diag_seconds": a.diag_seconds,
           "rounds": a.rounds, "batch": a.batch, "loaders": {}}
    with tempfile.TemporaryDirectory(prefix="sluice-torchdiag-bench-") as workdir:
        b = builders(a.files, workdir, a.batch)
        for name in a.only.split(","):
            print("torch_diagnose: %s" % name, file=sys.stderr, flush=True)
            out["loaders"][name] = bench_one(name, b[name], a, cores)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
