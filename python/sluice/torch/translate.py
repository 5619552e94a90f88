"""sluice.torch.translate: the loader as a sluice spec: torchvision image folders and transforms as sluice
ops, the rest as registered Python steps."""

import torch as _torch
from torch.utils.data import IterableDataset as _IterableDataset

import sluice as _sluice

from .loader import _batch_size


_INTERP = {"bilinear": "bilinear", "bicubic": "bicubic", "nearest": "nearest"}
# torchvision.io's read modes as sluice decode_image's channels (GRAY_ALPHA, two channels, has none)
_IO_MODES = {"UNCHANGED": 0, "GRAY": 1, "RGB": 3, "RGB_ALPHA": 4}


def _pair(size):
    if isinstance(size, int):
        return [size, size]
    size = list(size)
    return [int(size[0]), int(size[-1])] if size else None


def _interp(t):
    mode = getattr(t, "interpolation", None)
    name = getattr(mode, "value", mode)
    return _INTERP.get(str(name).lower()) if name is not None else "bilinear"


def _resample(t, state):
    """(sluice's resize method, None) when sluice resizes as step `t` does on its input (a PIL image, state "pil",
    or a uint8 tensor, "u8"), else (None, why not)."""
    m = _interp(t)
    mode = getattr(getattr(t, "interpolation", None), "value", getattr(t, "interpolation", None))
    if m is None:
        return None, f"its interpolation {mode!r} has no sluice equivalent"
    if state == "pil":  # PIL resizes with its filters widened by the shrink (antialiased) whatever `antialias` says
        return m, None
    if m == "nearest":
        return None, "nearest on a tensor (torch's) picks other pixels than PIL's nearest, which sluice's follows"
    if getattr(t, "antialias", None) is not True:
        return None, ("on a tensor without antialias=True: sluice resizes with an antialiasing filter (as PIL and "
                      "antialias=True do)")
    return m, None


def _io_decoder(fn):
    """sluice decode_image's args for a torchvision.io decoder given as a DatasetFolder's loader (decode_image or
    read_image, or a functools.partial of one setting mode or apply_exif_orientation), else None."""
    import functools
    try:
        import torchvision.io as tio
    except ImportError:
        return None
    kw = {}
    if isinstance(fn, functools.partial):
        if fn.args:
            return None
        fn, kw = fn.func, dict(fn.keywords)
    if fn not in [f for f in (getattr(tio, "decode_image", None), getattr(tio, "read_image", None)) if f]:
        return None
    mode = kw.pop("mode", "UNCHANGED")
    orient = kw.pop("apply_exif_orientation", False)
    channels = _IO_MODES.get(str(getattr(mode, "name", mode)).upper())
    if kw or channels is None:
        return None
    return dict({"channels": channels}, **({"orient": True} if orient else {}))


def _float_scale(t):
    """The scale of a uint8 -> float32 step (v2 ToDtype, ConvertImageDtype), None for any other conversion."""
    dtype = getattr(t, "dtype", None)
    if type(t).__name__ == "ToDtype":
        return (1 / 255 if t.scale else 1.0) if dtype == _torch.float32 else None
    return 1 / 255 if dtype == _torch.float32 else None


class _PyStep:
    """A loader step with no sluice equivalent, as a sluice map function: the element's image handed to the step in
    the form the loader's chain had there (a PIL image before the to-tensor step, a CHW tensor after it)."""

    def __init__(self, step, tensor, component="image"):
        self.step, self.tensor, self.component = step, tensor, component

    def __call__(self, e, rng=None):
        import numpy as np
        x = e[self.component]
        if self.tensor:
            y = self.step(_torch.from_numpy(np.array(x)))
        else:
            from PIL import Image
            y = self.step(Image.fromarray(np.ascontiguousarray(x)))
        out = dict(e)
        out[self.component] = y.numpy() if isinstance(y, _torch.Tensor) else np.asarray(y)
        return out


class _ToCHW:
    """sluice's HWC uint8 image as the uint8 CHW tensor PILToTensor, ToImage or a torchvision.io decoder gives (no
    sluice function writes uint8 CHW)."""

    def __call__(self, e, rng=None):
        import numpy as np
        out = dict(e)
        out["image"] = np.ascontiguousarray(np.transpose(e["image"], (2, 0, 1)))
        return out


class _PyDataset:
    """``dataset[i]`` as a sluice map function over a ``range`` op: the sample's parts as components "0", "1", ..."""

    def __init__(self, ds):
        self.ds = ds

    def __call__(self, e, rng=None):
        import numpy as np
        item = self.ds[int(e["value"])]
        parts = item if isinstance(item, (tuple, list)) else (item,)
        return {str(j): (p.numpy() if isinstance(p, _torch.Tensor) else p if isinstance(p, (int, float, bytes))
                         else np.asarray(p)) for j, p in enumerate(parts)}


def _translate_steps(steps, state, register, notes):
    """The sluice ops of a chain of torchvision transforms (v1 or v2) after the decode. `state` is what the next
    step takes: "pil" (a PIL image: sluice's HWC uint8 image), "u8" (a uint8 CHW tensor, from ToImage, PILToTensor
    or a torchvision.io decoder: sluice's image stays HWC, its image functions apply, and the channels go first at
    the float conversion, or in a Python step where none comes) or "tensor" (sluice holds what the chain holds).
    Steps without an equivalent are registered Python steps; those with one that cannot match say why in `notes`."""
    ops = []
    made_u8 = "torchvision.io decoder"

    def to_chw():
        ops.append(register(_ToCHW(), "".join(c for c in made_u8 if c.isalnum()), random=False))
        return "tensor"

    for t in steps:
        kind = type(t).__name__
        v2 = type(t).__module__.startswith("torchvision.transforms.v2")
        prev = ops[-1] if ops else {}
        image = state in ("pil", "u8")
        why = None
        if kind == "RandomResizedCrop" and image:
            m, why = _resample(t, state)
            if m:
                ops.append({"op": "map", "fn": "random_resized_crop", "parallelism": "autotune",
                            "args": {"size": _pair(t.size), "scale": list(t.scale), "ratio": list(t.ratio),
                                     "method": m}})
                continue
        elif kind == "Resize" and image and getattr(t, "size", None) is not None:
            m, why = _resample(t, state)
            if getattr(t, "max_size", None) is not None:
                m, why = None, "max_size has no sluice equivalent"
            if m:
                a = {"shorter_side": int(t.size if isinstance(t.size, int) else t.size[0])} \
                    if isinstance(t.size, int) or len(t.size) == 1 else {"size": _pair(t.size)}
                a["method"] = m
                ops.append({"op": "map", "fn": "resize", "args": a, "parallelism": "autotune"})
                continue
        elif kind == "CenterCrop" and image:
            ops.append({"op": "map", "fn": "center_crop", "args": {"size": _pair(t.size)}, "parallelism": "autotune"})
            continue
        elif kind == "RandomHorizontalFlip" and image:
            ops.append({"op": "map", "fn": "random_flip", "args": {"prob": float(t.p)}, "parallelism": "autotune"})
            continue
        elif kind in ("ToTensor", "ToImageTensor") and state == "pil":
            ops.append({"op": "map", "fn": "normalize", "parallelism": "autotune",
                        "args": {"scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "layout": "CHW"}})
            state = "tensor"
            continue
        elif kind in ("ToImage", "PILToTensor") and state == "pil":
            state, made_u8 = "u8", kind
            continue
        elif v2 and kind in ("ToImage", "PILToTensor", "ToTensor", "ToPureTensor") and state == "u8" or \
                v2 and kind == "ToPureTensor" and state == "tensor":
            continue  # v2 passes a tensor through these (ToImage only marks it an Image): the same values
        elif kind in ("ToDtype", "ConvertImageDtype", "ConvertDtype") and state == "u8":
            scale = _float_scale(t)
            if scale is not None:
                ops.append({"op": "map", "fn": "normalize", "parallelism": "autotune",
                            "args": {"scale": scale, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
                                     "layout": "CHW"}})
                state = "tensor"
                continue
            why = f"to {getattr(t, 'dtype', None)}: only float32 translates"
        elif kind == "Normalize" and state == "tensor" and prev.get("fn") == "normalize" and \
                prev["args"]["mean"] == [0.0, 0.0, 0.0] and prev["args"]["std"] == [1.0, 1.0, 1.0]:
            prev["args"]["mean"] = [float(x) for x in t.mean]
            prev["args"]["std"] = [float(x) for x in t.std]
            continue
        if why:
            notes.append(f"{'v2.' if v2 else ''}{kind} stays a Python step: {why}")
        if state == "u8":
            state = to_chw()
        name = kind if kind != "function" else getattr(t, "__name__", "fn")
        ops.append(register(_PyStep(t, state == "tensor"), "".join(c for c in name if c.isalnum()) or "fn"))
    if state == "u8":
        to_chw()
    return ops


def _translate(loader):
    """(spec, python steps, notes): the loader as a sluice spec; steps without a sluice equivalent are registered
    Python functions (named in the list), which the spec calls by name."""
    ds = loader.dataset
    B = _batch_size(loader)
    python, notes = [], []
    tag = f"{id(loader) & 0xffffff:06x}"

    def register(obj, label, random=True):
        name = f"torch_{label}_{tag}_{len(python)}"
        _sluice.register_fn(name, obj, random=random)
        python.append(name)
        return {"op": "map", "fn": name, "parallelism": "autotune"}

    # An image folder: PIL's loader gives an RGB PIL image (decode_image, 3 channels); a torchvision.io decoder a
    # uint8 CHW tensor with the channels its mode says (UNCHANGED: as stored).
    decode, state = None, None
    try:
        from torchvision.datasets import DatasetFolder
        from torchvision.datasets.folder import default_loader, pil_loader
        if isinstance(ds, DatasetFolder):
            if getattr(ds, "loader", None) in (default_loader, pil_loader):
                decode, state = {"channels": 3}, "pil"
            else:
                decode, state = _io_decoder(getattr(ds, "loader", None)), "u8"
    except ImportError:
        pass
    sampler = type(getattr(loader, "sampler", None)).__name__
    shuffle = sampler == "RandomSampler"
    if sampler not in ("RandomSampler", "SequentialSampler", "_InfiniteConstantSampler"):
        notes.append(f"the sampler ({sampler}) is not translated: the spec reads every sample, in order")
    if decode is not None:
        ops = [{"op": "image_folder", "root": str(ds.root), "shuffle": shuffle},
               {"op": "map", "fn": "decode_image", "args": decode, "parallelism": "autotune"}]
        steps = getattr(ds.transform, "transforms", None) if ds.transform is not None else []
        if steps is None:
            steps = [ds.transform]
        ops += _translate_steps(steps, state, register, notes)
        if getattr(ds, "target_transform", None) is not None:
            notes.append("target_transform is not translated: the spec yields the class index as 'label'")
        ops.append({"op": "map", "fn": "select", "args": {"keep": ["image", "label"]}})
    else:
        if isinstance(ds, _IterableDataset) or not hasattr(ds, "__len__"):
            return None, [], ["an iterable dataset has no sluice equivalent here: only map-style datasets translate"]
        ops = [{"op": "range", "stop": len(ds)}]
        if shuffle:
            ops.append({"op": "shuffle", "buffer": len(ds)})
        ops.append(register(_PyDataset(ds), type(ds).__name__ or "dataset"))
        notes.append(f"{type(ds).__name__}[i] stays a Python function (only torchvision image folders, read by "
                     "PIL or a torchvision.io decoder, translate to sluice's readers and decoders)")
    if loader.batch_sampler is not None:
        drop = getattr(loader.batch_sampler, "drop_last", loader.drop_last)
        ops.append({"op": "batch", "size": int(B), "drop_remainder": bool(drop)})
    ops.append({"op": "prefetch", "buffer": "autotune"})
    return {"name": f"{type(ds).__name__} (from a DataLoader)", "ops": ops}, python, notes
