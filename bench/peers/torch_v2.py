"""The imagenet suite pipeline in current PyTorch as torchvision's documentation recommends it: torchvision.io.decode_jpeg
on the encoded bytes (a uint8 tensor), then transforms.v2 on uint8 tensors (RandomResizedCrop(224),
RandomHorizontalFlip, ToDtype(float32, scale=True), Normalize), in a DataLoader with num_workers = the usable cores
(persistent workers, batch 64). Records come from the suite's TFRecord files (torch_imagenet.py's reader), each
worker taking its share of the files. `--config pil` runs torch_imagenet.py's PIL recipe in the same harness.

usage: torch_v2.py --files GLOB [--config v2|pil] [--seconds S] [--warmup S] [--workers N]
"""
import glob, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from torch.utils.data import DataLoader, IterableDataset, get_worker_info  # noqa: E402
from torchvision.io import ImageReadMode, decode_jpeg  # noqa: E402
from torchvision.transforms import v2  # noqa: E402
import torch_imagenet  # noqa: E402
from torch_imagenet import parse_example, tfrecords  # noqa: E402


class Records(IterableDataset):
    """Endless: each worker cycles over its share of the files."""

    def __init__(self, files, tf):
        self.files, self.tf = files, tf

    def __iter__(self):
        wi = get_worker_info()
        files = self.files if wi is None or len(self.files) < wi.num_workers else self.files[wi.id::wi.num_workers]
        while True:
            for path in files:
                for rec in tfrecords(path):
                    ex = parse_example(rec, {"image/encoded", "image/class/label"})
                    data = torch.frombuffer(bytearray(ex["image/encoded"]), dtype=torch.uint8)
                    yield self.tf(decode_jpeg(data, mode=ImageReadMode.RGB)), ex["image/class/label"]


def main():
    a = common.args(__doc__.split("\n")[0], ["imagenet"], ["v2", "pil"])
    files = sorted(glob.glob(a.files))
    if not files:
        raise SystemExit("no files match " + a.files)
    workers = a.workers or common.cores()
    if a.config == "v2":
        tf = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                         v2.ToDtype(torch.float32, scale=True),
                         v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
        ds = Records(files, tf)
    else:
        ds = torch_imagenet.ImagenetTFRecord(files * 1000, torch_imagenet.pil_transform())
    dl = DataLoader(ds, batch_size=64, num_workers=workers, drop_last=True, prefetch_factor=2,
                    persistent_workers=True)
    n, el, cpu = common.measure((x.shape[0] for x, _ in dl), a.warmup, a.seconds)
    common.report("PyTorch DataLoader", "torch %s, torchvision %s" % (torch.__version__, torchvision.__version__),
                  a.pipeline, a.config, n, el, cpu, workers=workers)


if __name__ == "__main__":
    main()
