"""The five suite pipelines in tf.data, as TensorFlow's documentation and reference input pipelines write them: the
peer bench/run compares sluice against (issue 40).

config autotune: interleave/map with num_parallel_calls=tf.data.AUTOTUNE and prefetch(AUTOTUNE) (the tf.data
performance guide); imagenet parses and preprocesses in one map with sample_distorted_bounding_box +
decode_and_crop_jpeg, as the ResNet input pipeline of TensorFlow's model garden does.
config vectorized (tabular): the guide's "vectorized mapping", lines batched first, then decode_csv, the hash and
log1p in one map per batch of 2048 lines (empty lines masked out there), with AUTOTUNE (a malformed line fails its
batch instead of being skipped).
config cache (imagenet-cacheable): AUTOTUNE plus cache() after the deterministic prefix, as the guide advises (the
optimization sluice's planner makes on its own).
config naive: the same pipeline misconfigured, as Plumber's baselines are: no num_parallel_calls (sequential
interleave and maps) and no prefetch.
Same data files as the suite spec, same outputs (float32 normalized images, flips, batch sizes; token ids bucketed
by length; parsed, hashed CSV columns), the dataset repeated so the measurement never runs out.

usage: tfdata.py --pipeline imagenet|imagenet-cacheable|ssd|transformer|tabular --config autotune|naive|vectorized|cache
                 --files GLOB [--vocab FILE] [--seconds S] [--warmup S] [--workers N]
"""
import os, sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import tensorflow as tf  # noqa: E402

MEAN = tf.constant([123.675, 116.28, 103.53])
STD = tf.constant([58.395, 57.12, 57.375])


def normalize(img):
    return (tf.cast(img, tf.float32) - MEAN) / STD


def random_crop_window(shape, area):
    """Inception-style crop window (the ResNet recipe's sample_distorted_bounding_box on the whole image)."""
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        shape, bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]), min_object_covered=0.1,
        aspect_ratio_range=[3 / 4, 4 / 3], area_range=area, max_attempts=10, use_image_if_no_bounding_boxes=True)
    return begin, size


def imagenet_parse(rec):
    f = tf.io.parse_single_example(rec, {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                                         "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    buf = f["image/encoded"]
    begin, size = random_crop_window(tf.image.extract_jpeg_shape(buf), (0.08, 1.0))
    y, x, _ = tf.unstack(begin)
    h, w, _ = tf.unstack(size)
    img = tf.image.decode_and_crop_jpeg(buf, tf.stack([y, x, h, w]), channels=3)
    img = tf.image.resize(img, [224, 224])
    img = tf.image.random_flip_left_right(img)
    return normalize(img), f["image/class/label"]


def cacheable_prefix(rec):
    """Parse, decode, resize the shorter side to 256, centre crop 256x256 (the deterministic prefix)."""
    f = tf.io.parse_single_example(rec, {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                                         "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    img = tf.io.decode_jpeg(f["image/encoded"], channels=3)
    hw = tf.cast(tf.shape(img)[:2], tf.float32)
    s = 256.0 / tf.reduce_min(hw)
    img = tf.image.resize(img, tf.cast(tf.round(hw * s), tf.int32))
    img = tf.image.resize_with_crop_or_pad(img, 256, 256)
    return tf.cast(tf.round(img), tf.uint8), f["image/class/label"]


def cacheable_train(img, label):
    begin, size = random_crop_window(tf.shape(img), (0.35, 1.0))
    img = tf.image.resize(tf.slice(img, begin, size), [224, 224])
    img = tf.image.random_flip_left_right(img)
    return normalize(img), label


BOX_KEYS = ("image/object/bbox/ymin", "image/object/bbox/xmin", "image/object/bbox/ymax", "image/object/bbox/xmax")


def ssd_parse(rec):
    feats = {k: tf.io.VarLenFeature(tf.float32) for k in BOX_KEYS}
    feats["image/encoded"] = tf.io.FixedLenFeature([], tf.string)
    feats["image/object/class/label"] = tf.io.VarLenFeature(tf.int64)
    f = tf.io.parse_single_example(rec, feats)
    boxes = tf.stack([tf.sparse.to_dense(f[k]) for k in BOX_KEYS], axis=1)[:100]
    labels = tf.sparse.to_dense(f["image/object/class/label"])[:100]
    n = tf.shape(boxes)[0]
    img = tf.image.resize(tf.io.decode_jpeg(f["image/encoded"], channels=3), [300, 300])
    if_flip = tf.random.uniform([]) < 0.5
    img = tf.cond(if_flip, lambda: tf.image.flip_left_right(img), lambda: img)
    ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=1)
    boxes = tf.cond(if_flip, lambda: tf.stack([ymin, 1 - xmax, ymax, 1 - xmin], axis=1), lambda: boxes)
    boxes = tf.pad(boxes, [[0, 100 - n], [0, 0]])
    labels = tf.pad(labels, [[0, 100 - n]], constant_values=-1)
    return normalize(img), boxes, labels, n


def tokenizer(vocab):
    table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        vocab, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), -1)
    words = [w.rstrip("\n") for w in open(vocab, encoding="utf-8")]
    unk = words.index("[UNK]") if "[UNK]" in words else (words.index("<unk>") if "<unk>" in words else len(words))

    def tokenize(line):
        # every ASCII punctuation mark its own token, as the spec's tokenize splits
        spaced = tf.strings.regex_replace(line, r"([!-/:-@\[-`{-~])", r" \1 ")
        ids = table.lookup(tf.strings.split(spaced))
        ids = tf.where(ids < 0, tf.constant(unk, tf.int64), ids)
        return tf.concat([[2], tf.cast(ids, tf.int32), [3]], 0)
    return tokenize


def tabular_parse(line):
    defaults = [tf.constant([], tf.int64)] + [[0.0]] * 13 + [[""]] * 26
    cols = tf.io.decode_csv(line, defaults)
    dense = tf.math.log1p(tf.stack(cols[1:14]))
    cat = tf.strings.to_hash_bucket_fast(tf.stack(cols[14:]), 1000003)
    return cols[0], dense, cat


def tabular_vectorized(lines):
    """The per-batch form (the performance guide's "vectorized mapping"): decode_csv on a batch of lines."""
    defaults = [tf.constant([], tf.int64)] + [[0.0]] * 13 + [[""]] * 26
    cols = tf.io.decode_csv(tf.boolean_mask(lines, tf.strings.length(lines) > 0), defaults)
    dense = tf.math.log1p(tf.stack(cols[1:14], axis=1))
    return cols[0], dense, tf.strings.to_hash_bucket_fast(tf.stack(cols[14:], axis=1), 1000003)


def build(a):
    auto = a.config in ("autotune", "vectorized", "cache")
    par = tf.data.AUTOTUNE if auto else None
    files = sorted(tf.io.gfile.glob(a.files))
    if not files:
        raise SystemExit("no files match " + a.files)
    p = a.pipeline
    if p == "imagenet":
        ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files)).repeat()
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=par)
        ds = ds.shuffle(1024).map(imagenet_parse, num_parallel_calls=par).batch(64, drop_remainder=True)
    elif p == "imagenet-cacheable":
        ds = tf.data.Dataset.from_tensor_slices(files)
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=par, deterministic=True)
        ds = ds.map(cacheable_prefix, num_parallel_calls=par)
        if a.config == "cache":  # the performance guide's advice: cache() after the expensive deterministic maps
            ds = ds.cache()
        ds = ds.repeat().shuffle(1024)
        ds = ds.map(cacheable_train, num_parallel_calls=par).batch(64, drop_remainder=True)
    elif p == "ssd":
        ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files)).repeat()
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=par)
        ds = ds.shuffle(512).map(ssd_parse, num_parallel_calls=par).batch(32, drop_remainder=True)
    elif p == "transformer":
        ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files)).repeat()
        ds = ds.interleave(tf.data.TextLineDataset, cycle_length=2, num_parallel_calls=par)
        ds = ds.filter(lambda s: tf.strings.length(s) > 0).map(tokenizer(a.vocab), num_parallel_calls=par)
        ds = ds.filter(lambda t: tf.shape(t)[0] <= 256).shuffle(2048)
        ds = ds.bucket_by_sequence_length(lambda t: tf.shape(t)[0], [16, 32, 64, 128], [256, 128, 64, 32, 16])
    elif p == "tabular" and a.config == "vectorized":
        ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files)).repeat()
        ds = ds.interleave(tf.data.TextLineDataset, cycle_length=2, num_parallel_calls=par)
        ds = ds.batch(2048, drop_remainder=True).map(tabular_vectorized, num_parallel_calls=par)
    elif p == "tabular":
        ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files)).repeat()
        ds = ds.interleave(tf.data.TextLineDataset, cycle_length=2, num_parallel_calls=par)
        ds = ds.filter(lambda s: tf.strings.length(s) > 0).map(tabular_parse, num_parallel_calls=par)
        ds = ds.ignore_errors().batch(2048, drop_remainder=True)
    if auto:
        ds = ds.prefetch(tf.data.AUTOTUNE)
    opt = tf.data.Options()
    opt.threading.private_threadpool_size = a.workers or common.cores()
    return ds.with_options(opt)


def main():
    a = common.args(__doc__.split("\n")[0], ["imagenet", "imagenet-cacheable", "ssd", "transformer", "tabular"],
                    ["autotune", "naive", "vectorized", "cache"])
    ds = build(a)
    n, el, cpu = common.measure((int(tf.shape(tf.nest.flatten(b)[0])[0]) for b in ds), a.warmup, a.seconds)
    common.report("tf.data", tf.__version__, a.pipeline, a.config, n, el, cpu,
                  threads=a.workers or common.cores())


if __name__ == "__main__":
    main()
