#!/usr/bin/python3
"""bench/torch_diagnose.py: sluice.torch.diagnose against measurement (issue 39's targets).

For the planted loaders (bench/torch_planted.py: a slow step, few workers, num_workers=0, big batches) and the
suite's imagenet PIL loader (torchvision ImageFolder over the bench's JPEGs, written out of its TFRecord shards;
RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize, batches of 64):
  - the bottleneck diagnose names, against the planted one;
  - what it recommends (the proposal it measured faster, else the settings as given) measured against a
    num_workers x prefetch_factor grid and against the loader as given (every point in alternating rounds,
    medians; issue 48's targets: >= 0.9 of the grid's best, never below the loader as given), and the prediction
    against the measured rate of what is recommended (target within 20%); diagnose's wall time;
  - the tracing cost: the loader's rate while diagnose traces it against its rate untraced, alternating.
For the imagenet loader also: num_workers=0 against tuned() of it (the speed-up), and the translated sluice spec's
rate beside the loader's (the spec's own plan: Pipeline.optimize, then measured).

usage: torch_diagnose.py --files 'DIR/*.tfrecord' [--seconds S] [--diag-seconds D] [--rounds R] [--max-workers N]
                         [--only slow_step,few_workers,no_workers,transfer,imagenet] [--batch B] [--hog]
--hog runs one steady CPU hog (a process spinning on a core) for the whole bench: the "beside the hog" figures.
Needs `import sluice` (bench/run installs the package into a venv beside the build). Prints one JSON object.
"""
import argparse, glob, json, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import sluice.torch as st  # noqa: E402
from sluice.torch.check import measure_loader  # noqa: E402
from torch_planted import planted  # noqa: E402

# The planted bottleneck of each loader, as diagnose's bottleneck "kind" says it.
PLANTED = {"slow_step": "step", "few_workers": "too few workers", "no_workers": "num_workers=0",
           "transfer": "main process", "imagenet": None}


def rate(loader, seconds, warmup=0.5):
    """Batches/s of `loader` over `seconds` after its first batch and `warmup` more (epochs restart as needed; its
    workers stopped after): the measurement diagnose's own check makes."""
    n, t = measure_loader(loader, seconds, warmup)
    return n / t


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

    def no_workers(**kw):
        kw.setdefault("num_workers", 0)
        return planted_kind("few_workers")(**kw)

    return {"slow_step": planted_kind("slow_step"), "few_workers": planted_kind("few_workers"),
            "no_workers": no_workers, "transfer": planted_kind("transfer"), "imagenet": imagenet}


def settings(loader, w, pf):
    """`loader` with num_workers w and prefetch_factor pf (same dataset, sampler, collate)."""
    from sluice.torch.loader import _loader_args, _make_loader
    over = {"num_workers": w, "persistent_workers": w > 0}
    if w > 0:
        over["prefetch_factor"] = pf
    return _make_loader(_loader_args(loader), **over)


def bench_one(name, make, a, cores):
    base = make()
    t0 = time.monotonic()
    rep = st.diagnose(base, seconds=a.diag_seconds)
    wall = time.monotonic() - t0
    d = rep.to_dict()
    # What is recommended: the measured proposal, else the settings as given ("no change helps here")
    rec = rep.recommended or {"num_workers": base.num_workers, "prefetch_factor": base.prefetch_factor}
    rw, rpf = rec["num_workers"], rec.get("prefetch_factor") or 2
    predicted = d["proposal"]["num_workers"]["predicted"] if rep.recommended else d["measured"]["batches_per_s"]
    points = [(0, 2)] + [(w, pf) for w in range(1, a.max_workers + 1) for pf in (2, 4)]
    if (rw, rpf) not in points:
        points.append((rw, rpf))
    runs = {p: [] for p in points}
    traced, untraced = [], []
    for r in range(a.rounds):  # alternating: every point once per round
        for p in points:
            runs[p].append(rate(settings(base, *p), a.seconds))
        untraced.append(rate(make(), a.seconds))  # the loader as given
        traced.append(st.diagnose(make(), seconds=a.seconds, spec_seconds=0, check_seconds=0,
                                  quiet=True).to_dict()["measured"]["batches_per_s"])
    med = {p: statistics.median(v) for p, v in runs.items()}
    best = max(med, key=med.get)
    out = {"planted": PLANTED[name], "named": d["bottleneck"]["kind"], "words": d["bottleneck"]["words"],
           "settings": d["settings"], "recommended": {"num_workers": rw, "prefetch_factor": rpf},
           "changed": bool(rep.recommended), "check": d["check"], "diagnose_wall": wall,
           "proposal": {k: v["value"] for k, v in d["proposal"].items()},
           "measured_as_given": d["measured"]["batches_per_s"], "bound": d["bound"],
           "predicted": predicted, "planner_predicted": d["predicted"],
           "grid": [{"num_workers": p[0], "prefetch_factor": p[1], "batches_per_s": med[p], "runs": runs[p]}
                    for p in points],
           "best": {"num_workers": best[0], "prefetch_factor": best[1], "batches_per_s": med[best]},
           "recommended_measured": med[(rw, rpf)], "recommended_over_best": med[(rw, rpf)] / med[best],
           "predicted_over_measured": predicted / med[(rw, rpf)],
           "as_given": statistics.median(untraced),
           "recommended_over_given": med[(rw, rpf)] / statistics.median(untraced),
           "tracing": {"untraced": untraced, "traced": traced,
                       "cost": 1 - statistics.median(traced) / statistics.median(untraced)}}
    if name == "imagenet":
        zero = settings(base, 0, 2)
        zr, tr = [], []
        tuned_loader = st.tuned(zero, seconds=a.diag_seconds, quiet=True)
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
                              "diagnose_says": d.get("sluice_spec", {}).get("measured_over_loader"),
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
    ap.add_argument("--hog", action="store_true", help="one steady CPU hog beside the whole bench")
    a = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    a.max_workers = a.max_workers or cores + 1
    out = {"torch": torch.__version__, "cores": cores, "max_workers": a.max_workers, "seconds": a.seconds,
           "diag_seconds": a.diag_seconds,
           "rounds": a.rounds, "batch": a.batch, "hog": a.hog, "load_before": os.getloadavg()[0], "loaders": {}}
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if a.hog else None
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-torchdiag-bench-") as workdir:
            b = builders(a.files, workdir, a.batch)
            for name in a.only.split(","):
                print("torch_diagnose: %s" % name, file=sys.stderr, flush=True)
                out["loaders"][name] = bench_one(name, b[name], a, cores)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
