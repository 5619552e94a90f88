"""sluice.torch: a sluice pipeline as a ``torch.utils.data.IterableDataset``.

    ds = sluice.torch.Dataset("examples/imagenet.json")
    for batch in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0):
        images, labels = batch["image/encoded"], batch["image/class/label"]   # torch.Tensor, no copy

The pipeline batches and runs on its own threads: use ``batch_size=None`` and ``num_workers=0``. Tensors share
memory with the engine's buffers (``torch.from_numpy``). Each ``iter()`` is one epoch: a spec without ``repeat``
ends there, and the next epoch runs with the pipeline seed plus the epoch number, so ``shuffle``, ``files``
shuffles and random functions that take the pipeline's seed reshuffle each epoch, identically on every rank
(shards stay disjoint). A spec with a ``cache`` op keeps one pipeline (and its cache) for every epoch.
"""

import json as _json
import warnings as _warnings

import numpy as _np
import torch as _torch
from torch.utils.data import IterableDataset as _IterableDataset

import sluice as _sluice


def _load_spec(spec):
    if isinstance(spec, dict):
        return dict(spec)
    text, _, is_path = _sluice._spec_text(spec)
    if is_path:
        with open(text, encoding="utf-8") as f:
            text = f.read()
    try:
        return _json.loads(text)
    except ValueError:
        _sluice.Pipeline(spec)  # raises SpecError with the library's message (line and column)
        raise


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
    """``spec``: a path, a JSON string or a dict (docs/spec.md). ``reshuffle``: give each epoch its own seed
    (pipeline seed + epoch); False runs every epoch with the spec's seed."""

    def __init__(self, spec, reshuffle=True):
        super().__init__()
        self._spec = _load_spec(spec)
        self._pipeline = _sluice.Pipeline(self._spec)  # SpecError now, not at the first epoch
        self._cached = any(op.get("op") == "cache" for op in self._pipeline.spec().get("ops", []))
        self._reshuffle = reshuffle
        self.epoch = 0

    @property
    def pipeline(self):
        """The pipeline of the current epoch (optimize() it to plan its "autotune" knobs)."""
        return self._pipeline

    def set_epoch(self, epoch):
        """Sets the epoch the next iteration runs (as DistributedSampler.set_epoch)."""
        self.epoch = int(epoch)

    def _pipeline_for(self, epoch):
        if epoch == 0 or not self._reshuffle or self._cached:
            return self._pipeline
        spec = self._pipeline.spec()  # keeps knobs an optimize() planned
        spec["seed"] = (int(spec.get("seed", 0)) + epoch) % (1 << 64)
        return _sluice.Pipeline(spec)

    def __iter__(self):
        info = _torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise _sluice.Error("sluice.torch.Dataset: use DataLoader(num_workers=0): the pipeline runs its own "
                                "threads, and each worker process would read the whole dataset")
        epoch = self.epoch
        self.epoch += 1
        for element in self._pipeline_for(epoch):
            yield to_torch(element)
