"""The imagenet suite pipeline in Meta's SPDL, as its documentation builds an image pipeline: spdl.pipeline's
PipelineBuilder with a source, a decode stage run by a thread pool (concurrency = the usable cores; spdl.io's
FFmpeg-based demux/decode releases the GIL), aggregate(64), a collate stage, a sink buffer.

Decode: spdl.io.demux_image + decode_packets with an FFmpeg filter graph doing the random resized crop (the window
drawn as torchvision's RandomResizedCrop draws it, on the size the demuxer reports), the random flip (hflip) and
rgb24 conversion; collate: the uint8 batch to a float32 normalized torch tensor (NCHW). Records come from the
suite's TFRecord files (the framing and tf.Example parse of torch_imagenet.py).

usage: spdl_imagenet.py --files GLOB [--seconds S] [--warmup S] [--workers N]
"""
import glob, importlib.metadata, math, os, random, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402
import spdl.io  # noqa: E402
import torch  # noqa: E402
from spdl.pipeline import PipelineBuilder  # noqa: E402
from torch_imagenet import parse_example, tfrecords  # noqa: E402

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255


def crop_window(w, h, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    area = w * h
    for _ in range(10):
        a = area * rng.uniform(*scale)
        r = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        cw, ch = int(round(math.sqrt(a * r))), int(round(math.sqrt(a / r)))
        if 0 < cw <= w and 0 < ch <= h:
            return cw, ch, rng.randint(0, w - cw), rng.randint(0, h - ch)
    cw, ch = min(w, int(round(h * ratio[1]))), min(h, int(round(w / ratio[0])))
    return cw, ch, (w - cw) // 2, (h - ch) // 2


def records(files, rng):
    while True:
        order = list(files)
        rng.shuffle(order)
        for f in order:
            yield from tfrecords(f)


def decode(rec):
    rng = random.Random()
    buf = parse_example(rec, {"image/encoded"})["image/encoded"]
    packets = spdl.io.demux_image(buf)
    cw, ch, x, y = crop_window(packets.width, packets.height, rng)
    flt = "crop=%d:%d:%d:%d,scale=224:224%s,format=rgb24" % (cw, ch, x, y, ",hflip" if rng.random() < 0.5 else "")
    return spdl.io.to_numpy(spdl.io.convert_frames(spdl.io.decode_packets(packets, filter_desc=flt)))


def collate(items):
    x = torch.from_numpy(np.stack(items)).permute(0, 3, 1, 2).float()
    return (x - MEAN) / STD


def main():
    a = common.args(__doc__.split("\n")[0], ["imagenet"], ["threads"])
    files = sorted(glob.glob(a.files))
    if not files:
        raise SystemExit("no files match " + a.files)
    n = a.workers or common.cores()
    torch.set_num_threads(1)
    pipe = (PipelineBuilder()
            .add_source(records(files, random.Random(42)))
            .pipe(decode, concurrency=n)
            .aggregate(64, drop_last=True)
            .pipe(collate)
            .add_sink(3)
            .build(num_threads=n))
    with pipe.auto_stop():
        nx, el, cpu = common.measure((b.shape[0] for b in pipe), a.warmup, a.seconds)
    common.report("SPDL", importlib.metadata.version("spdl"), a.pipeline, a.config, nx, el, cpu, threads=n)


if __name__ == "__main__":
    main()
