#!/usr/bin/python3
"""The imagenet pipeline read from an image folder by torchvision's datasets.ImageFolder, or from WebDataset tar shards
by the webdataset library, each through PyTorch's DataLoader, as their documentation writes them: PIL decode,
RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize, batches of 64 (bench/formats.py compares them with
sluice reading the same files). Reports the best of the given num_workers settings; one JSON line.

usage: torch_formats.py --layout folder|tar --files ROOT_OR_GLOB [--workers 0,1,2] [--seconds S] [--warmup S]
                        [--warmup-epochs N] [--cache-dir DIR]
--warmup-epochs: the warm-up lasts until N epochs have ended too (the steady state of a loader that caches);
--cache-dir: webdataset's own cache of the shards it downloads (cache_dir: a shard is fetched to DIR in full, then
read from there; a fresh folder under DIR for each num_workers setting).
"""
import argparse, glob, json, os, sys, time

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import tree_cpu  # noqa: E402
from torch_imagenet import pil_transform  # noqa: E402


def dataset(layout, files, cache_dir=None):
    tf = pil_transform()
    if layout == "folder":
        from torchvision import datasets
        return datasets.ImageFolder(files, transform=tf), {"shuffle": True}, "torchvision " + __import__("torchvision").__version__
    import webdataset as wds
    # a URL (bench/remote.py) goes to webdataset as it is: it expands the braces and fetches each shard with curl
    shards = files if files.startswith(("http://", "https://")) else sorted(glob.glob(files))
    if not shards:
        raise SystemExit("no shards match " + files)
    kw = {"cache_dir": cache_dir} if cache_dir else {}
    ds = (wds.WebDataset(shards, shardshuffle=len(shards), empty_check=False, **kw).shuffle(1000).decode("pil")
          .to_tuple("jpg", "cls").map_tuple(tf, int))
    return ds, {}, "webdataset " + wds.__version__


def run(layout, files, workers, seconds, warmup, warmup_epochs=0, cache_dir=None):
    if cache_dir:
        import tempfile
        cache_dir = tempfile.mkdtemp(prefix="wds-cache-", dir=cache_dir)
    ds, kw, version = dataset(layout, files, cache_dir)
    if workers:
        kw.update(prefetch_factor=2, persistent_workers=True)
    dl = DataLoader(ds, batch_size=64, num_workers=workers, drop_last=True, **kw)
    t0 = time.monotonic()
    start = None
    n = epochs = 0
    while True:  # epochs until the time is up; one loader for all of them, as a training loop keeps it
        for x, _ in dl:
            assert x.shape == (64, 3, 224, 224) and x.dtype == torch.float32
            now = time.monotonic()
            if start is None and now - t0 >= warmup and epochs >= warmup_epochs:
                start, n, c0 = now, 0, tree_cpu()
            elif start is not None:
                n += x.shape[0]
            if start is not None and now - start >= seconds:
                el = now - start
                return {"workers": workers, "examples_per_second": n / el, "examples": n, "seconds": el,
                        "cpu_seconds": tree_cpu() - c0, "warmup_seconds": start - t0}, version
        epochs += 1
        if start is None and epochs >= warmup_epochs and time.monotonic() - t0 > warmup * 10 + 60:
            raise SystemExit("dataset too small to measure")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", choices=("folder", "tar"), required=True)
    ap.add_argument("--files", required=True, help="folder: the root; tar: the shards' glob, or an http(s) URL with braces")
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--warmup-epochs", type=int, default=0)
    ap.add_argument("--cache-dir", default=None)
    a = ap.parse_args()
    results = []
    for w in a.workers.split(","):
        r, version = run(a.layout, a.files, int(w), a.seconds, a.warmup, a.warmup_epochs, a.cache_dir)
        results.append(r)
    best = max(results, key=lambda r: r["examples_per_second"])
    print(json.dumps(dict(best, version=version, torch=torch.__version__, all=results)), flush=True)


if __name__ == "__main__":
    main()
