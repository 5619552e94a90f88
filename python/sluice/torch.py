"""sluice.torch: a sluice pipeline as a ``torch.utils.data.IterableDataset``.

    ds = sluice.torch.Dataset("examples/imagenet.json")
    for batch in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0):
        images, labels = batch["image"], batch["image/class/label"]   # torch.Tensor, no copy

The pipeline batches and runs on its own threads: use ``batch_size=None`` and ``num_workers=0``. Tensors share
memory with the engine's buffers (``torch.from_numpy``). Each ``iter()`` is one epoch (a run of the pipeline): a
spec without ``repeat`` ends there, and each run of a pipeline is its next epoch, so ``files`` and ``shuffle`` ops
reshuffle per epoch as their ``reshuffle_each_iteration`` knob says, the same way on every rank that runs the
same spec (shards stay disjoint), and a ``cache`` op serves the epochs after the first.
"""

import warnings as _warnings

import numpy as _np
import torch as _torch
from torch.utils.data import IterableDataset as _IterableDataset

import sluice as _sluice


def to_torch(element):
    """An element dict with its numpy arrays as tensors sharing their memory (bytes and lists stay)."""
    out = {}
    for k, v in element.items():
        if isinstance(v, _np.ndarray):
            if v.flags.writeable:
                out[k] = _torch.from_numpy(v)
            else:  # a cache op's buffers: shared with later epochs, do not write to these tensors
                with _warnings.catch_warnings():
                    _warnings.simplefilter("ignore", UserWarning)
                    out[k] = _torch.from_numpy(v)
        else:
            out[k] = v
    return out


class Dataset(_IterableDataset):
    """``spec``: a path, a JSON string, a dict (docs/spec.md) or a sluice.Pipeline; ``pipeline_kwargs`` go to
    ``sluice.Pipeline`` (``tune=True``). Raises sluice.SpecError now for a bad spec. For NCHW image batches (no
    ``permute``), give the spec's ``normalize`` ``"layout": "CHW"``."""

    def __init__(self, spec, **pipeline_kwargs):
        super().__init__()
        if isinstance(spec, _sluice.Pipeline):
            if pipeline_kwargs:
                raise TypeError("sluice.torch.Dataset: pipeline options go with a spec, not with a built Pipeline")
            self._pipeline = spec
        else:
            self._pipeline = _sluice.Pipeline(spec, **pipeline_kwargs)
        self.epoch = 0

    @property
    def pipeline(self):
        """The sluice.Pipeline (optimize() it, e.g. with consumer_cores=1, to plan its "autotune" knobs)."""
        return self._pipeline

    def __iter__(self):
        info = _torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise _sluice.Error("sluice.torch.Dataset: use DataLoader(num_workers=0): the pipeline runs its own "
                                "threads, and each worker process would read the whole dataset")
        self.epoch += 1
        for element in self._pipeline:
            yield to_torch(element)


# The bottleneck of an existing DataLoader and the settings that fix it (sluice/torch_diag.py, docs/python.md).
from .torch_diag import DiagnoseError, Report, diagnose, tuned  # noqa: E402,F401

if __name__ == "__main__":  # python -m sluice.torch diagnose SCRIPT.py
    import sys as _sys

    from .torch_diag import main as _main

    _sys.exit(_main())
