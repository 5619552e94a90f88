# test_image_folder.py: the Python package reading an image folder: samples, labels and order against torchvision's
# datasets.ImageFolder when it is importable (Debian's python3-torchvision), and always against the same rules
# computed here with os.walk; pixels of a PNG and a lossless WebP against PIL's when PIL is importable.
import os
import shutil

import numpy as np
import pytest

import sluice
from conftest import ROOT

CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
EXTS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


@pytest.fixture()
def tree(tmp_path):
    """root/<class>/... with upper-case, hidden, nested and symlinked class folders, and a non-image file."""
    r = tmp_path / "root"
    png, webp = os.path.join(CORPUS, "image", "rgb8.png"), os.path.join(CORPUS, "image", "lossless_alpha.webp")
    jpg = os.path.join(CORPUS, "jpeg", "rgb420.jpg")
    files = {"dog/b.JPG": jpg, "dog/a0.png": png, "dog/a b.webp": webp, "dog/a/q.png": png,
             "dog/a/deeper/r.Jpeg": jpg, "cat/x.jpg": jpg, "Bird/y.png": png, ".hidden/h.webp": webp}
    for rel, src in files.items():
        os.makedirs(os.path.dirname(r / rel), exist_ok=True)
        shutil.copy(src, r / rel)
    (r / "dog" / "notes.txt").write_text("no image")
    (r / "stray.jpg").write_bytes(b"at the root: no class")
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(png, tmp_path / "elsewhere" / "i.png")
    os.symlink(tmp_path / "elsewhere", r / "linked")
    return str(r)


def walk_rules(root):
    """ImageFolder's listing, written out: sorted class folders (symlinks followed), each walked with
    sorted(os.walk(followlinks=True)), files sorted, extensions case-insensitive."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    out = []
    for i, c in enumerate(classes):
        for d, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            out += [(os.path.join(d, n), i) for n in sorted(names) if n.lower().endswith(EXTS)]
    return out


def read(root, **knobs):
    spec = {"ops": [{"op": "image_folder", "root": root, **knobs}]}
    return [(e["filename"], int(e["label"]), bytes(e["image/encoded"])) for e in sluice.Pipeline(spec)]


def test_order_and_labels_as_the_rules(tree):
    got = read(tree)
    assert [(f, l) for f, l, _ in got] == walk_rules(tree)
    for f, _, b in got:
        with open(f, "rb") as fh:
            assert fh.read() == b


def test_order_and_labels_as_torchvision(tree):
    try:
        from torchvision import datasets
    except ImportError as e:
        pytest.skip(f"torchvision is not importable ({e}); install Debian's python3-torchvision")
    ref = datasets.ImageFolder(tree)
    got = read(tree)
    assert [(f, l) for f, l, _ in got] == [(p, t) for p, t in ref.samples]


def test_pixels_as_pil(tree):
    try:
        from PIL import Image
    except ImportError as e:
        pytest.skip(f"PIL is not importable ({e}); install Debian's python3-pil")
    spec = {"ops": [{"op": "image_folder", "root": tree},
                    {"op": "map", "fn": "decode_image", "args": {"channels": 4, "keep": True}}]}
    n = 0
    for e in sluice.Pipeline(spec):
        name = e["filename"]
        if name.lower().endswith((".png", ".webp")):  # lossless: exact
            ref = np.asarray(Image.open(name).convert("RGBA"))
            assert np.array_equal(e["image"], ref), name
            n += 1
    assert n >= 5


def test_exif_orientation_as_pil(tmp_path):
    try:
        from PIL import Image, ImageOps
    except ImportError as e:
        pytest.skip(f"PIL is not importable ({e}); install Debian's python3-pil")
    rng = np.random.default_rng(0)
    base = Image.fromarray(np.kron(rng.integers(0, 255, (4, 6, 3), dtype=np.uint8), np.ones((8, 8, 1), np.uint8)))
    for k in range(1, 9):
        d = tmp_path / "root" / f"o{k}"
        d.mkdir(parents=True)
        exif = Image.Exif()
        exif[0x0112] = k
        base.save(d / "x.jpg", quality=95, exif=exif)
    spec = {"ops": [{"op": "image_folder", "root": str(tmp_path / "root")},
                    {"op": "map", "fn": "decode_image", "args": {"orient": True}}]}
    n = 0
    for e in sluice.Pipeline(spec):
        ref = np.asarray(ImageOps.exif_transpose(Image.open(e["filename"])).convert("RGB")).astype(int)
        assert e["image"].shape == ref.shape, e["filename"]
        assert np.abs(e["image"].astype(int) - ref).max() <= 2, e["filename"]
        n += 1
    assert n == 8
