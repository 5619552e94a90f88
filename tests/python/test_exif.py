# test_exif.py: decode_image with "orient": true turns PNG (eXIf chunk) and WebP (EXIF chunk) images as their EXIF
# orientation says, pixel for pixel as PIL's ImageOps.exif_transpose; without it, as stored.
import numpy as np
import pytest

import sluice

Image = pytest.importorskip("PIL.Image")
ImageOps = pytest.importorskip("PIL.ImageOps")


def planted(tmp_path, fmt, orientation):
    rng = np.random.default_rng(orientation)
    img = Image.fromarray(rng.integers(0, 255, (6, 4, 3), dtype=np.uint8))  # 6 rows, 4 columns: not square
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / f"o{orientation}.{fmt}"
    kw = {"lossless": True} if fmt == "webp" else {}
    img.save(path, exif=exif.tobytes(), **kw)
    return path


@pytest.mark.parametrize("fmt", ["png", "webp"])
@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_orient_follows_exif(tmp_path, fmt, orientation):
    path = planted(tmp_path, fmt, orientation)
    want = np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("RGB"))
    stored = np.asarray(Image.open(path).convert("RGB"))
    for orient, expect in ((True, want), (False, stored)):
        p = sluice.Pipeline({"ops": [{"op": "files", "list": [str(path)]}, {"op": "map", "fn": "read_file"},
                                     {"op": "map", "fn": "decode_image", "args": {"channels": 3, "orient": orient}}]})
        (e,) = list(p)
        got = [v for k, v in e.items() if isinstance(v, np.ndarray) and v.ndim == 3][0]
        assert got.shape == expect.shape and np.array_equal(got, expect), (fmt, orientation, orient)
