# test_torch_v2.py: sluice.torch.diagnose's translation of torchvision.transforms.v2 chains and of image folders
# read by a torchvision.io decoder (issue 39): the translated spec yields the loader's tensors (exactly for crops,
# deterministic flips and conversions; within a resampler's tolerance for resizes), steps sluice cannot match stay
# Python steps with a note, and the diagnosis names a v2 chain's steps. `make test-python-torch2` runs this file in
# a venv with torch 2 and torchvision 0.29 (Debian's torchvision 0.14 has no v2: skipped there).
import functools
import os

import pytest

try:
    import torch
    import torchvision
    from torchvision.transforms import v2
except ImportError as e:
    if os.environ.get("SLUICE_TORCH2_REQUIRED"):
        raise
    pytest.skip(f"torchvision.transforms.v2 is not importable ({e}); make test-python-torch2 runs these tests with "
                "torch 2", allow_module_level=True)

import numpy as np  # noqa: E402

import sluice.torch as st  # noqa: E402

# torchvision 0.29 deprecates its decoders (for TorchCodec) and ToTensor, warning at each call: both still run here
pytestmark = [pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:The transform `ToTensor\\(\\)` is deprecated:UserWarning")]

MEAN, STD = [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]
F32 = torch.float32
# The folder's images are 50x40: a RandomResizedCrop of the whole image (scale 1, its aspect ratio) is deterministic.
WHOLE = dict(scale=(1.0, 1.0), ratio=(1.25, 1.25))


@pytest.fixture()
def smooth_folder(tmp_path):
    """An image folder of 2 classes x 6 JPEGs of 50x40: smooth colour waves, a different one in each."""
    from PIL import Image
    yy, xx = np.mgrid[0:40, 0:50]
    for c in ("a", "b"):
        os.makedirs(tmp_path / c)
        for i in range(6):
            a = np.stack([127 + 120 * np.sin(xx / (3 + i + k) + yy / (5 + k + (c == "b"))) for k in range(3)], -1)
            Image.fromarray(a.clip(0, 255).astype(np.uint8)).save(tmp_path / c / f"{i}.jpg")
    return tmp_path


def chain(name):
    """(dataset loader, transform, the translated ops after decode_image ("py": a Python step), exact or not)."""
    io = torchvision.io
    return {
        # PIL images through v2: crops, flips, the to-tensor steps and Normalize are exact
        "pil_toimage_todtype": (None, [v2.CenterCrop(16), v2.RandomHorizontalFlip(p=1.0), v2.ToImage(),
                                       v2.ToDtype(F32, scale=True), v2.Normalize(MEAN, STD)],
                                ["center_crop", "random_flip", "normalize"], True),
        "pil_piltotensor_noscale": (None, [v2.PILToTensor(), v2.CenterCrop(20), v2.ToDtype(F32)],
                                    ["center_crop", "normalize"], True),
        "pil_totensor": (None, [v2.RandomHorizontalFlip(p=0.0), v2.ToTensor(), v2.Normalize(MEAN, STD)],
                         ["random_flip", "normalize"], True),
        "pil_uint8_out": (None, [v2.ToImage(), v2.CenterCrop(16), v2.ToPureTensor()], ["center_crop", "py"], True),
        # resizes: of PIL images (PIL's filters) and of uint8 tensors (torch's antialiased ones)
        "pil_resize": (None, [v2.RandomResizedCrop((32, 40), **WHOLE), v2.Resize(20), v2.ToImage(),
                              v2.ToDtype(F32, scale=True)], ["random_resized_crop", "resize", "normalize"], False),
        "tensor_resize": (None, [v2.ToImage(), v2.RandomResizedCrop((32, 40), **WHOLE), v2.Resize([24, 30]),
                                 v2.ToDtype(F32, scale=True)],
                          ["random_resized_crop", "resize", "normalize"], False),
        # a tensor resized without antialiasing: resize's "antialias": false (torch's plain interpolate)
        "tensor_resize_no_antialias": (None, [v2.ToImage(), v2.Resize(20, antialias=False),
                                              v2.ToDtype(F32, scale=True)], ["resize", "normalize"], False),
        # what sluice cannot match on a tensor stays torch's own, as a Python step
        "tensor_bicubic_no_antialias": (None, [v2.ToImage(), v2.Resize(20, antialias=False, interpolation=v2.
                                                                      InterpolationMode.BICUBIC),
                                               v2.ToDtype(F32, scale=True)], ["py", "py", "py"], True),
        # torchvision.io decoders as the folder's loader: uint8 CHW tensors
        "io_decode_image": (io.decode_image, [v2.CenterCrop(16), v2.ToDtype(F32, scale=True),
                                              v2.Normalize(MEAN, STD)], ["center_crop", "normalize"], True),
        "io_read_image_resize": (io.read_image, [v2.Resize(20), v2.RandomHorizontalFlip(p=1.0),
                                                 v2.ToDtype(F32, scale=True)], ["resize", "random_flip", "normalize"],
                                 False),
        "io_read_image_alone": (io.read_image, None, ["py"], True),
        "io_gray": (functools.partial(io.decode_image, mode=io.ImageReadMode.GRAY), [v2.CenterCrop(16)],
                    ["center_crop", "py"], True),
    }[name]


@pytest.mark.parametrize("name", ["pil_toimage_todtype", "pil_piltotensor_noscale", "pil_totensor", "pil_uint8_out",
                                  "pil_resize", "tensor_resize", "tensor_resize_no_antialias",
                                  "tensor_bicubic_no_antialias", "io_decode_image",
                                  "io_read_image_resize", "io_read_image_alone", "io_gray"])
def test_translated_spec_yields_what_the_loader_yields(request, nothing_left, name):
    read, steps, want, exact = chain(name)
    # exact chains on noise (any slip shows); resizes on smooth images (noise is all aliasing, where resamplers
    # part most)
    folder = request.getfixturevalue("folder" if exact else "smooth_folder")
    kw = {"loader": read} if read is not None else {}
    ds = torchvision.datasets.ImageFolder(str(folder), transform=v2.Compose(steps) if steps else None, **kw)
    loader = torch.utils.data.DataLoader(ds, batch_size=4)
    r = st.diagnose(loader, seconds=0.3, spec_seconds=0)
    ops = r.spec["ops"]
    assert ops[0]["op"] == "image_folder" and ops[1]["fn"] == "decode_image"
    channels = {"io_gray": 1}.get(name, 0 if read is not None else 3)
    assert ops[1]["args"] == {"channels": channels}
    got = [op["fn"] for op in ops[2:2 + len(want)]]
    assert ["py" if f in r.python_steps else f for f in got] == want, (got, r.python_steps)
    assert ops[2 + len(want)]["fn"] == "select"
    if name == "tensor_resize_no_antialias":
        assert ops[2]["args"] == {"shorter_side": 20, "method": "bilinear", "antialias": False}
    if name == "tensor_bicubic_no_antialias":
        assert any("v2.Resize stays a Python step: on a tensor without antialias=True" in n
                   for n in r.to_dict()["notes"])
    n = 0
    for (x, y), b in zip(loader, r.pipeline()):
        x = x.numpy()
        assert b["image"].dtype == x.dtype and b["image"].shape == x.shape
        if exact:
            np.testing.assert_allclose(b["image"], x, atol=1e-5)
        else:
            # resamplers apart (sluice's fixed-point filters, PIL's, torch's): within a few levels of 255 per value
            # and a third of a level on average (the chains end unnormalized: 0..1 or 0..255 floats)
            d = np.abs(b["image"].astype(np.float64) - x) * (255 if x.max() <= 1 else 1)
            if name == "tensor_resize_no_antialias":
                # v2 resizes a uint8 tensor with torch's native uint8 kernel (fixed-point passes, each rounded),
                # sluice as torch's float interpolate then rounded (v1's F.resize): 1 level apart at most, on up to
                # half the values of this 2x downscale (every output a tie of 4 pixels)
                assert d.max() <= 1.001 and d.mean() <= 0.6, (d.max(), d.mean())
            else:
                assert d.max() <= 6 and d.mean() <= 0.35, (d.max(), d.mean())
        np.testing.assert_array_equal(y.numpy(), b["label"])
        n += 1
    assert n == 3


def test_normalize_follows_v2_defaults(folder, nothing_left):
    # v2.ToDtype scales only when asked (scale=False: 0..255 floats); its Resize antialiases tensors by default
    tf = v2.Compose([v2.ToImage(), v2.Resize(20, interpolation=v2.InterpolationMode.BICUBIC), v2.ToDtype(F32),
                     v2.Normalize(MEAN, STD)])
    loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(str(folder), transform=tf), batch_size=4)
    r = st.diagnose(loader, seconds=0.3, spec_seconds=0)
    resize, norm = r.spec["ops"][2], r.spec["ops"][3]
    assert resize["args"] == {"shorter_side": 20, "method": "bicubic"}
    assert norm["args"] == {"scale": 1.0, "mean": MEAN, "std": STD, "layout": "CHW"}
    # a nearest resize of a tensor picks other pixels than PIL's nearest: torch's own, said in the notes
    tf = v2.Compose([v2.ToImage(), v2.Resize(20, interpolation=v2.InterpolationMode.NEAREST)])
    loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(str(folder), transform=tf), batch_size=4)
    r = st.diagnose(loader, seconds=0.3, spec_seconds=0)
    assert any(n.startswith("v2.Resize stays a Python step: nearest") for n in r.to_dict()["notes"])


def test_diagnose_names_v2_steps(folder, nothing_left):
    # The traced copy of a v2 Compose times each step under its v2 class name and yields what the loader yields.
    tf = v2.Compose([v2.ToImage(), v2.RandomResizedCrop(24), v2.RandomHorizontalFlip(), v2.ToDtype(F32, scale=True),
                     v2.Normalize(MEAN, STD)])
    for read in (None, torchvision.io.decode_image):
        kw = {"loader": read} if read is not None else {}
        loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(str(folder), transform=tf, **kw),
                                             batch_size=4, num_workers=1)
        r = st.diagnose(loader, seconds=0.5, spec_seconds=0)
        d = r.to_dict()
        assert {"ToImage", "RandomResizedCrop", "RandomHorizontalFlip", "ToDtype", "Normalize"} <= \
            set(d["measured"]["steps"])
        assert d["measured"]["steps"]["RandomResizedCrop"]["cpu_per_sample"] > 0
        assert r.python_steps == [] and "random_resized_crop" in [op.get("fn") for op in r.spec["ops"]]
    with st.diagnose(loader, None) as r:
        for x, y in loader:
            assert x.shape == (4, 3, 24, 24) and x.dtype == F32
    assert "ToDtype" in r.to_dict()["measured"]["steps"]
