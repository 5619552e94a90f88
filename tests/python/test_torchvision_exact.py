# test_torchvision_exact.py: sluice's image functions against torchvision's own output on the same decoded image
# (issue 49 row 4), where sluice translates a torchvision step (sluice.torch.diagnose) or claims to match it:
# center_crop (exact, odd margins and padding), resize (antialias on: within the resampler's documented bound; off:
# torch's interpolate within 1 level; shorter_side: torchvision's output size), normalize (float32 rounding), and
# random_resized_crop's windows (the same distribution; the windows drawn for a seed differ). It runs with Debian's
# torchvision 0.14 in `make test-python` and with torchvision 0.29 in `make test-python-torch2`.
import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
Image = pytest.importorskip("PIL.Image")
import torchvision.transforms as T  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402

import sluice  # noqa: E402

H, W = 181, 243  # odd sides: every crop below has an odd margin somewhere


def _smooth(h, w):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([x * 255 / w, y * 255 / h, 128 + 60 * np.sin((x + y) / 9.0)], -1)
    img += 30 * np.sin(x / 7.0)[..., None] + 20 * np.cos(y / 5.0)[..., None]
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def png(tmp_path_factory):
    """A PNG of a smooth H x W picture (PNG: sluice and PIL decode the same pixels)."""
    p = tmp_path_factory.mktemp("tv") / "a.png"
    Image.fromarray(_smooth(H, W)).save(p)
    return str(p)


def _run(png, *ops, n=1, seed=None):
    spec = {"ops": [{"op": "files", "list": [png]}, {"op": "map", "fn": "read_file"},
                    {"op": "map", "fn": "decode_image"}]}
    if n > 1:
        spec["ops"].append({"op": "repeat", "count": n})
    spec["ops"] += [{"op": "map", "fn": fn, "args": args} for fn, args in ops]
    if seed is not None:
        spec["seed"] = seed
    return [e["image"] for e in sluice.Pipeline(spec)]


@pytest.fixture(scope="module")
def decoded(png):
    """The image as sluice decodes it, and as torchvision takes it (a CHW uint8 tensor; PIL decodes the same)."""
    img = _run(png)[0]
    assert (img == np.asarray(Image.open(png).convert("RGB"))).all()
    return img, torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).contiguous()


def _hwc(t):
    return t.permute(1, 2, 0).numpy()


# odd margins (3, 5, 7, 1: Python's round takes halves to even), a crop larger than the image on one side or both
@pytest.mark.parametrize("size", [[178, 238], [174, 236], [180, 242], [120, 121], [190, 100], [100, 250],
                                  [185, 250], [224, 224]])
def test_center_crop_is_torchvisions(png, decoded, size):
    img, t = decoded
    got = _run(png, ("center_crop", {"size": size}))[0]
    assert got.shape == (size[0], size[1], 3)
    assert (got == _hwc(F.center_crop(t, size))).all()
    assert (got == np.asarray(T.CenterCrop(size)(Image.fromarray(img)))).all()  # PIL's path: the same pixels


@pytest.mark.parametrize("size", [[64, 80], [100, 100], [37, 51], [224, 300], [400, 500]])
def test_resize_with_antialias_is_within_the_documented_bound(png, decoded, size):
    """sluice's resize always antialiases by default, as PIL does and torchvision's antialias=True: its fixed-point
    filter against torch's float one (and PIL's), within docs/python.md's bound on a smooth picture."""
    img, t = decoded
    got = _run(png, ("resize", {"size": size}))[0].astype(int)
    for want in (_hwc(F.resize(t, size, antialias=True)), np.asarray(F.resize(Image.fromarray(img), size))):
        d = np.abs(got - want.astype(int))
        print("resize", size, "max", d.max(), "mean %.3f" % d.mean())
        assert d.max() <= 6 and d.mean() <= 0.35, (size, d.max(), d.mean())


@pytest.mark.parametrize("size", [[64, 80], [100, 100], [37, 51], [224, 300], [H, W], [400, 500]])
def test_resize_without_antialias_is_torchs_interpolate(png, decoded, size):
    """"antialias": false samples the 2x2 pixels around each point as torch's interpolate(antialias=False): within 1
    level (float rounding at halves), on a few pixels in a thousand, where antialiasing would be up to ~80 apart."""
    _, t = decoded
    got = _run(png, ("resize", {"size": size, "antialias": False}))[0].astype(int)
    d = np.abs(got - _hwc(F.resize(t, size, antialias=False)).astype(int))
    assert d.max() <= 1 and (d > 0).mean() < 1e-3, (size, d.max(), (d > 0).mean())


@pytest.mark.parametrize("shorter", [25, 100, 130, 224])
def test_shorter_side_gives_torchvisions_size(png, decoded, shorter):
    """Resize(int): the longer side is int(shorter * long / short), truncated (243 * 100 / 181 = 134.25, 243 * 25 /
    181 = 33.56 -> 33)."""
    _, t = decoded
    got = _run(png, ("resize", {"shorter_side": shorter}))[0]
    assert got.shape == tuple(_hwc(F.resize(t, shorter, antialias=True)).shape)


def test_normalize_is_to_tensor_then_normalize(png, decoded):
    """normalize with scale 1/255 and "layout": "CHW" against ToTensor + Normalize: float32 rounding apart."""
    img, _ = decoded
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    got = _run(png, ("normalize", {"scale": 1 / 255, "mean": mean, "std": std, "layout": "CHW"}))[0]
    want = F.normalize(F.to_tensor(Image.fromarray(img)), mean, std).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.abs(got - want).max() <= 1e-6


def _ks(a, b):
    """The two-sample Kolmogorov-Smirnov statistic."""
    a, b = np.sort(a), np.sort(b)
    v = np.concatenate([a, b])
    return np.abs(np.searchsorted(a, v, side="right") / len(a) - np.searchsorted(b, v, side="right") / len(b)).max()


def test_random_resized_crop_draws_torchvisions_distribution(tmp_path):
    """The windows random_resized_crop draws against RandomResizedCrop.get_params on the same image size: the same
    distribution of areas, aspect ratios and positions (10 tries, then the centred fallback), by the two-sample
    Kolmogorov-Smirnov statistic (fixed seeds: deterministic). The windows a seed gives differ: sluice draws from its
    per-element seed (the spec's seed, the op, the epoch, the element), torch from its global generator."""
    h, w, n = 200, 250, 3000
    yy, xx = np.mgrid[0:h, 0:w]
    coords = np.stack([yy, xx, np.zeros_like(yy)], -1).astype(np.uint8)  # each pixel holds its own (y, x)
    p = tmp_path / "coords.png"
    Image.fromarray(coords).save(p)
    scale, ratio = (0.08, 1.0), (3 / 4, 4 / 3)
    # nearest to 256 x 256 (more than either side): the first and last output pixels are the window's corners
    outs = _run(str(p), ("random_resized_crop", {"size": [256, 256], "scale": list(scale), "ratio": list(ratio),
                                                 "method": "nearest"}), n=n, seed=7)
    ours = np.array([[o[0, 0, 0], o[0, 0, 1], o[-1, -1, 0] - o[0, 0, 0] + 1, o[-1, -1, 1] - o[0, 0, 1] + 1]
                     for o in outs], dtype=float)
    torch.manual_seed(7)
    img = torch.zeros(3, h, w)
    theirs = np.array([T.RandomResizedCrop.get_params(img, scale, ratio) for _ in range(n)], dtype=float)
    assert len(ours) == n
    for name, f in [("area", lambda r: r[:, 2] * r[:, 3] / (h * w)), ("log ratio", lambda r: np.log(r[:, 3] / r[:, 2])),
                    ("top", lambda r: r[:, 0] / np.maximum(h - r[:, 2], 1)),
                    ("left", lambda r: r[:, 1] / np.maximum(w - r[:, 3], 1))]:
        d = _ks(f(ours), f(theirs))
        assert d < 0.05, (name, d)  # 0.05: the 0.1% critical value for two samples of 3,000
