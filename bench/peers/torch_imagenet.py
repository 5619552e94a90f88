#!/usr/bin/python3
"""The imagenet and ssd suite pipelines in PyTorch's DataLoader: the peer sluice is compared against.

Reads the same TFRecord files (a small reader of the TFRecord framing and of the tf.Example fields we need),
decodes with PIL, then
- imagenet: torchvision RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize; batches of 64;
- ssd: Resize((300, 300)), the boxes padded to 100 (with their count), a random horizontal flip of the image and
  its boxes, ToTensor, Normalize; batches of 32;
float32 CHW tensors (sluice's pipelines give HWC float32 of the same size and dtype). Reports the best of the given
num_workers settings. Prints one JSON object.

usage: torch_imagenet.py --files 'DIR/*.tfrecord' [--pipeline imagenet|ssd] [--workers 0,1,2] [--seconds 20]
                         [--warmup 2] [--threads N]
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


def parse_example(rec, want, lists=()):
    """Returns {name: bytes, int, or list} for the features in `want` of a serialised tf.Example (int64 features
    named in `lists` and float features as lists)."""
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
                elif kind == 2:  # FloatList (packed or not): all values
                    vals = []
                    for n, wt, v in parse_fields(lst):
                        if n == 1:
                            vals += struct.unpack("<%df" % (len(v) // 4), bytes(v))
                    out[key] = vals
                elif kind == 3:  # Int64List (packed): the first value, or all of them for a key in `lists`
                    vals = []
                    for n, wt, v in parse_fields(lst):
                        if n == 1 and wt == 2:
                            i = 0
                            while i < len(v):
                                x, i = read_varint(v, i)
                                vals.append(x)
                        elif n == 1:
                            vals.append(v)
                    out[key] = vals if key in lists else (vals[0] if vals else None)
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


def pil_transform():
    """The imagenet recipe on PIL images (torchvision's classic transforms)."""
    return transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])


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


BOX_KEYS = ("image/object/bbox/ymin", "image/object/bbox/xmin", "image/object/bbox/ymax", "image/object/bbox/xmax")
MAX_BOXES = 100


class SsdTFRecord(IterableDataset):
    """Images resized to 300x300 with their boxes (normalised ymin, xmin, ymax, xmax) padded to MAX_BOXES, the
    pair flipped left-right at random, as the suite's ssd spec does (pad_boxes, random_flip with boxes)."""

    def __init__(self, files):
        self.files = files
        self.resize = transforms.Resize((300, 300))
        self.tail = transforms.Compose([transforms.ToTensor(),
                                        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])

    def __iter__(self):
        wi = get_worker_info()
        files = self.files if wi is None else self.files[wi.id::wi.num_workers]
        want = {"image/encoded", "image/object/class/label"} | set(BOX_KEYS)
        for path in files:
            for rec in tfrecords(path):
                ex = parse_example(rec, want, lists={"image/object/class/label"})
                img = self.resize(Image.open(io.BytesIO(ex["image/encoded"])).convert("RGB"))
                cols = [ex.get(k) or [] for k in BOX_KEYS]
                k = min(min(len(c) for c in cols), MAX_BOXES)
                boxes = torch.zeros(MAX_BOXES, 4)
                if k:
                    boxes[:k] = torch.tensor([c[:k] for c in cols]).t()
                labels = torch.zeros(MAX_BOXES, dtype=torch.int64)
                lab = (ex.get("image/object/class/label") or [])[:k]
                labels[:len(lab)] = torch.tensor(lab, dtype=torch.int64)
                if torch.rand(1).item() < 0.5:
                    img = img.transpose(Image.FLIP_LEFT_RIGHT)
                    xmin = boxes[:k, 1].clone()
                    boxes[:k, 1] = 1 - boxes[:k, 3]
                    boxes[:k, 3] = 1 - xmin
                yield self.tail(img), boxes, labels, k


def run(files, workers, seconds, warmup, pipeline="imagenet"):
    if pipeline == "ssd":
        ds, bs, shape = SsdTFRecord(files), 32, (32, 3, 300, 300)
    else:
        ds, bs, shape = ImagenetTFRecord(files, pil_transform()), 64, (64, 3, 224, 224)
    n = batches = 0
    t0 = time.monotonic()
    c0 = time.process_time()
    start = None
    # One loader for all epochs (persistent workers), as a training loop keeps it.
    kw = {"prefetch_factor": 2, "persistent_workers": True} if workers else {}
    dl = DataLoader(ds, batch_size=bs, num_workers=workers, drop_last=True, **kw)
    while True:  # epochs until the time is up
        for x, *_ in dl:
            assert x.shape == shape and x.dtype == torch.float32
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
    ap.add_argument("--pipeline", choices=("imagenet", "ssd"), default="imagenet")
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
    results = [run(files, int(w), a.seconds, a.warmup, a.pipeline) for w in a.workers.split(",")]
    best = max(results, key=lambda r: r["images_per_second"])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"peer": "pytorch-dataloader", "pipeline": a.pipeline, "torch": torch.__version__, "best": best, "all": results,
                      "peak_rss_kb": rss}))


if __name__ == "__main__":
    main()
