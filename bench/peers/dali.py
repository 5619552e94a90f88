"""The imagenet suite pipeline in NVIDIA DALI on the CPU only (no GPU here): the pipeline of DALI's ResNet-50 training
example (fn.readers.tfrecord, fn.decoders.image_random_crop, fn.resize, fn.crop_mirror_normalize with a random
mirror), built with device_id=None and every operator on "cpu", num_threads = the usable cores.

Reads the suite's TFRecord files through index files made once with DALI's own tfrecord2idx (into a folder dali-idx
beside them, inside the git-ignored data folder). Output: float32 normalized 224x224 batches of 64 (DALI's CHW
layout, as the example writes).

usage: dali.py --files GLOB [--seconds S] [--warmup S] [--workers N]
"""
import glob, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import nvidia.dali as dali  # noqa: E402
import nvidia.dali.fn as fn  # noqa: E402
import nvidia.dali.tfrecord as tfrec  # noqa: E402
import nvidia.dali.types as types  # noqa: E402


def indexes(files, folder):
    os.makedirs(folder, exist_ok=True)
    tool = os.path.join(os.path.dirname(sys.executable), "tfrecord2idx")
    out = []
    for f in files:
        idx = os.path.join(folder, os.path.basename(f) + ".idx")
        if not os.path.exists(idx) or os.path.getmtime(idx) < os.path.getmtime(f):
            subprocess.run([tool, f, idx], check=True, capture_output=True)
        out.append(idx)
    return out


def pipeline(files, idx, threads):
    @dali.pipeline_def(batch_size=64, num_threads=threads, device_id=None, seed=42)
    def resnet_train():
        rec = fn.readers.tfrecord(path=files, index_path=idx, random_shuffle=True, initial_fill=1024,
                                  name="Reader", features={
                                      "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                                      "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
        images = fn.decoders.image_random_crop(rec["image/encoded"], device="cpu", output_type=types.RGB,
                                               random_aspect_ratio=[3 / 4, 4 / 3], random_area=[0.08, 1.0],
                                               num_attempts=10)
        images = fn.resize(images, device="cpu", resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, device="cpu", dtype=types.FLOAT, output_layout="CHW",
                                          crop=(224, 224), mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, rec["image/class/label"]
    return resnet_train()


def main():
    a = common.args(__doc__.split("\n")[0], ["imagenet"], ["cpu"])
    files = sorted(glob.glob(a.files))
    if not files:
        raise SystemExit("no files match " + a.files)
    threads = a.workers or common.cores()
    pipe = pipeline(files, indexes(files, os.path.join(os.path.dirname(files[0]), "dali-idx")), threads)
    pipe.build()

    def batches():
        while True:
            imgs, _ = pipe.run()
            yield len(imgs)
    n, el, cpu = common.measure(batches(), a.warmup, a.seconds)
    common.report("DALI", dali.__version__, a.pipeline, a.config, n, el, cpu, threads=threads)


if __name__ == "__main__":
    main()
