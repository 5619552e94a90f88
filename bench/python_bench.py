#!/usr/bin/python3
"""bench/python_bench.py: what Python costs on top of the engine, and a training loop fed by sluice vs DataLoader.

  overhead  the suite's imagenet (and tabular) pipeline iterated from Python into torch tensors against
            `sluice run` of the same spec, in separate processes taking turns (A B A B ...): Python/CLI throughput.
  train     a PyTorch training loop whose step takes a fixed time without CPU (an emulated accelerator step,
            time.sleep): steps/s and the share of time the loop waits for input, fed by sluice.torch.Dataset
            (spec optimized with consumer_cores=1) and by torch's DataLoader with the PIL/torchvision pipeline of
            bench/peers/torch_imagenet.py (num_workers 0/1/2), on the same files and cores.

usage: python_bench.py all --sluice CLI --imagenet SPEC [--tabular SPEC] [--seconds S] [--warmup W] [--reps N]
                           [--step-ms MS] [--workers 0,1,2] [--files GLOB]
       python_bench.py iterate SPEC --seconds S --warmup W            (one measured process, JSON out)
       python_bench.py train SPEC --seconds S --warmup W --step-ms MS (sluice.torch.Dataset)
       python_bench.py train-peer --files GLOB --workers W ...        (DataLoader)
Needs `import sluice` (bench/run installs the package into a venv under the build dir). Prints one JSON object.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)


def endless(spec):
    """The spec with a `repeat` after its `files` op (or first op): runs as long as the measurement needs."""
    s = json.loads(json.dumps(spec))
    ops = s["ops"]
    at = next((i for i, op in enumerate(ops) if op["op"] == "files"), 0)
    if not any(op["op"] == "repeat" for op in ops):
        ops.insert(at + 1, {"op": "repeat"})
    return s


def examples_of(element):
    import numpy as np

    for v in element.values():
        if isinstance(v, np.ndarray) and v.ndim > 0:
            return v.shape[0]
        if hasattr(v, "shape") and len(v.shape) > 0:
            return v.shape[0]
    return 1


# ---------------------------------------------------------------- measured processes
def cmd_iterate(a):
    import sluice
    import sluice.torch

    p = sluice.Pipeline(a.spec)
    t0 = time.monotonic()
    start = None
    n = ex = 0
    for e in p:
        e = sluice.torch.to_torch(e)
        now = time.monotonic()
        if start is None:
            if now - t0 >= a.warmup:
                start, c0 = now, time.process_time()
            continue
        n += 1
        ex += examples_of(e)
        if now - start >= a.seconds:
            break
    el = time.monotonic() - start
    print(json.dumps({"elements_per_second": n / el, "examples_per_second": ex / el, "elements": n,
                      "cpu_seconds": time.process_time() - c0}))


def train_loop(batches, seconds, warmup, step_s):
    """Steps of step_s seconds (sleep: the accelerator works, the CPU is free) on each batch; measures steps/s and
    the share of wall time spent waiting for the next batch."""
    it = iter(batches)
    t0 = time.monotonic()
    start = None
    steps = 0
    wait = 0.0
    while True:
        w0 = time.monotonic()
        batch = next(it)
        w1 = time.monotonic()
        if start is None and w1 - t0 >= warmup:
            start, steps, wait = w1, 0, 0.0
        elif start is not None:
            wait += w1 - w0
        time.sleep(step_s)
        if start is not None:
            steps += 1
            if time.monotonic() - start >= seconds:
                break
    el = time.monotonic() - start
    del batch
    return {"steps_per_second": steps / el, "wait_share": wait / el, "steps": steps, "seconds": el}


def cmd_train(a):
    import sluice.torch
    import torch

    ds = sluice.torch.Dataset(a.spec)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)

    def batches():
        while True:
            yield from loader

    print(json.dumps(train_loop(batches(), a.seconds, a.warmup, a.step_ms / 1000)))


def cmd_train_peer(a):
    import glob
    import importlib.util

    import torch
    from torchvision import transforms

    spec = importlib.util.spec_from_file_location("torch_imagenet", os.path.join(HERE, "peers/torch_imagenet.py"))
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    ds = peer.ImagenetTFRecord(sorted(glob.glob(a.files)), tf)
    kw = {"prefetch_factor": 2, "persistent_workers": True} if a.workers else {}
    dl = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=a.workers, drop_last=True, **kw)

    def batches():
        while True:
            yield from dl

    r = train_loop(batches(), a.seconds, a.warmup, a.step_ms / 1000)
    r["workers"] = a.workers
    print(json.dumps(r))


# ---------------------------------------------------------------- the driver
def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=TOP)
    if p.returncode:
        raise SystemExit("python_bench: failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def optimize(cli, spec_path, out_path, seconds, consumer_cores=None):
    cmd = [cli, "optimize", spec_path, "-o", out_path, "--seconds", str(seconds), "--measure", "0", "--json"]
    if consumer_cores:
        cmd += ["--consumer-cores", str(consumer_cores)]
    run_json(cmd)
    return out_path


def overhead(a, name, spec_path, work):
    """Python (into torch tensors) vs `sluice run`, each in its own process, taking turns."""
    spec = endless(json.load(open(spec_path)))
    raw = os.path.join(work, name + ".json")
    json.dump(spec, open(raw, "w"))
    tuned = optimize(a.sluice, raw, os.path.join(work, name + "-tuned.json"), a.optimize_seconds)
    me = [sys.executable, os.path.abspath(__file__)]
    cli, py = [], []
    for _ in range(a.reps):
        cli.append(run_json([a.sluice, "run", tuned, "--seconds", str(a.seconds), "--warmup", str(a.warmup),
                             "--json", "--quiet"])["examples_per_second"])
        py.append(run_json(me + ["iterate", tuned, "--seconds", str(a.seconds), "--warmup",
                                 str(a.warmup)])["examples_per_second"])
    c, p = statistics.median(cli), statistics.median(py)
    return {"cli_examples_per_second": c, "python_examples_per_second": p, "ratio": p / c if c else None,
            "cli_runs": cli, "python_runs": py}


def train(a, spec_path, work):
    spec = endless(json.load(open(spec_path)))
    raw = os.path.join(work, "train.json")
    json.dump(spec, open(raw, "w"))
    tuned = optimize(a.sluice, raw, os.path.join(work, "train-tuned.json"), a.optimize_seconds, consumer_cores=1)
    me = [sys.executable, os.path.abspath(__file__)]
    common = ["--seconds", str(a.seconds), "--warmup", str(a.warmup), "--step-ms", str(a.step_ms)]
    out = {"step_ms": a.step_ms, "sluice": [], "dataloader": {}}
    try:
        import torchvision  # noqa: F401
        have_peer = bool(a.files)
    except ImportError:
        have_peer = False
        out["dataloader_skipped"] = "torchvision not installed (make deps-bench)"
    workers = [int(w) for w in a.workers.split(",")] if have_peer else []
    for _ in range(a.reps):  # alternating: sluice, DataLoader(0), DataLoader(1), ...
        out["sluice"].append(run_json(me + ["train", tuned] + common))
        for w in workers:
            out["dataloader"].setdefault(str(w), []).append(
                run_json(me + ["train-peer", "--files", a.files, "--workers", str(w)] + common))

    def med(runs):
        return {"steps_per_second": statistics.median(r["steps_per_second"] for r in runs),
                "wait_share": statistics.median(r["wait_share"] for r in runs)}

    out["sluice_median"] = med(out["sluice"])
    out["dataloader_median"] = {w: med(r) for w, r in out["dataloader"].items()}
    if out["dataloader_median"]:
        best = max(out["dataloader_median"].items(), key=lambda kv: kv[1]["steps_per_second"])
        out["dataloader_best"] = {"workers": int(best[0]), **best[1]}
        out["ratio"] = out["sluice_median"]["steps_per_second"] / best[1]["steps_per_second"]
    return out


def cmd_all(a):
    work = tempfile.mkdtemp(prefix="sluice-pybench-")
    r = {"seconds": a.seconds, "reps": a.reps}
    import torch

    r["torch"] = torch.__version__
    r["imagenet"] = overhead(a, "imagenet", a.imagenet, work)
    if a.tabular:
        r["tabular"] = overhead(a, "tabular", a.tabular, work)
    r["train"] = train(a, a.imagenet, work)
    print(json.dumps(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("iterate", "train", "train-peer", "all"):
        s = sub.add_parser(name)
        if name in ("iterate", "train"):
            s.add_argument("spec")
        s.add_argument("--seconds", type=float, default=10)
        s.add_argument("--warmup", type=float, default=2)
        s.add_argument("--step-ms", type=float, default=20)
        if name == "train-peer":
            s.add_argument("--files", required=True)
            s.add_argument("--workers", type=int, default=0)
        if name == "all":
            s.add_argument("--sluice", required=True)
            s.add_argument("--imagenet", required=True)
            s.add_argument("--tabular")
            s.add_argument("--files", help="the imagenet TFRecord files, for the DataLoader peer")
            s.add_argument("--workers", default="0,1,2")
            s.add_argument("--reps", type=int, default=3)
            s.add_argument("--optimize-seconds", type=float, default=3)
    a = ap.parse_args()
    {"iterate": cmd_iterate, "train": cmd_train, "train-peer": cmd_train_peer, "all": cmd_all}[a.cmd](a)


if __name__ == "__main__":
    main()
