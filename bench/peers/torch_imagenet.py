#!/usr/bin/python3
"""The imagenet suite pipeline in PyTorch's DataLoader: the peer sluice is compared against.

Reads the same TFRecord files (a small reader of the TFRecord framing and of the tf.Example fields we need),
decodes with PIL, then torchvision RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize; batches of 64
float32 CHW tensors (sluice's pipeline gives HWC float32 of the same size and dtype). Reports the best of the given
num_workers settings. Prints one JSON object.

usage: torch_imagenet.py --files 'DIR/*.tfrecord' [--workers 0,1,2] [--seconds 20] [--warmup 2] [--threads N]
"""
import argparse, glob, io, json, os, resource, struct, sys, time

import torch
from PIL import Image
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from torchvision import transforms


def read_varint(b, i):
    shift = result = 0
    while True:
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            return result, i
        shift += 7


def parse_fields(b):
    """Yields (field number, wire type, value) of a protobuf message (value: bytes for length-delimited)."""
    i, n = 0, len(b)
    while i < n:
        key, i = read_varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(b, i)
        elif wt == 2:
            ln, i = read_varint(b, i)
            v = b[i:i + ln]
            i += ln
        elif wt == 5:
            v = b[i:i + 4]
            i += 4
        elif wt == 1:
            v = b[i:i + 8]
            i += 8
        else:
            raise ValueError("bad wire type %d" % wt)
        yield num, wt, v


def parse_example(rec, want):
    """Returns {name: bytes or int} for the features in `want` of a serialised tf.Example."""
    out = {}
    for num, _, features in parse_fields(rec):
        if num != 1:
            continue
        for fnum, _, entry in parse_fields(features):
            if fnum != 1:
                continue
            key = val = None
            for enum, _, ev in parse_fields(entry):
                if enum == 1:
                    key = bytes(ev).decode()
                elif enum == 2:
                    val = ev
            if key not in want or val is None:
                continue
            for kind, _, lst in parse_fields(val):
                if kind == 1:  # BytesList
                    out[key] = next(bytes(v) for n, _, v in parse_fields(lst) if n == 1)
                elif kind == 3:  # Int64List (packed)
                    for n, wt, v in parse_fields(lst):
                        if n == 1:
                            out[key] = read_varint(v, 0)[0] if wt == 2 else v
    return out


def tfrecords(path):
    with open(path, "rb") as f:
        while True:
            hdr = f.read(12)
            if len(hdr) < 12:
                return
            (n,) = struct.unpack("<Q", hdr[:8])
            data = f.read(n)
            f.read(4)  # data CRC: sluice checks it; this peer, like most Python readers, does not
            yield data


class ImagenetTFRecord(IterableDataset):
    def __init__(self, files, tf):
        self.files, self.tf = files, tf

    def __iter__(self):
        wi = get_worker_info()
        files = self.files if wi is None else self.files[wi.id::wi.num_workers]
        for path in files:
            for rec in tfrecords(path):
                ex = parse_example(rec, {"image/encoded", "image/class/label"})
                img = Image.open(io.BytesIO(ex["image/encoded"])).convert("RGB")
                yield self.tf(img), ex["image/class/label"]


def run(files, workers, seconds, warmup):
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    ds = ImagenetTFRecord(files, tf)
    n = batches = 0
    t0 = time.monotonic()
    c0 = time.process_time()
    start = None
    # One loader for all epochs (persistent workers), as a training loop keeps it.
    kw = {"prefetch_factor": 2, "persistent_workers": True} if workers else {}
    dl = DataLoader(ds, batch_size=64, num_workers=workers, drop_last=True, **kw)
    while True:  # epochs until the time is up
        for x, y in dl:
            assert x.shape == (64, 3, 224, 224) and x.dtype == torch.float32
            now = time.monotonic()
            if start is None and now - t0 >= warmup:
                start, n, cstart = now, 0, time.process_time()
            elif start is not None:
                n += x.shape[0]
                batches += 1
            if start is not None and now - start >= seconds:
                el = now - start
                cpu = time.process_time() - cstart
                return {"workers": workers, "images_per_second": n / el, "images": n, "seconds": el,
                        "main_cpu_seconds": cpu}
        if start is None and time.monotonic() - t0 > warmup * 10 + 60:
            raise SystemExit("dataset too small to measure")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", required=True)
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: library default)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    files = sorted(glob.glob(a.files))
    if not files:
        raise SystemExit("no files match " + a.files)
    results = [run(files, int(w), a.seconds, a.warmup) for w in a.workers.split(",")]
    best = max(results, key=lambda r: r["images_per_second"])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"peer": "pytorch-dataloader", "torch": torch.__version__, "best": best, "all": results,
                      "peak_rss_kb": rss}))


if __name__ == "__main__":
    main()
