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
        self._run = None  # the run being iterated (its state() is what state_dict() saves)
        self._resume = None  # a state load_state_dict() gave: the next __iter__ continues from it
        self._next_epoch = None  # set_epoch(n): the next __iter__ is epoch n

    @property
    def pipeline(self):
        """The sluice.Pipeline (optimize() it, e.g. with consumer_cores=1, to plan its "autotune" knobs)."""
        return self._pipeline

    def __iter__(self):
        info = _torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise _sluice.Error("sluice.torch.Dataset: use DataLoader(num_workers=0): the pipeline runs its own "
                                "threads, and each worker process would read the whole dataset")
        state, self._resume = self._resume, None
        if state is None and self._next_epoch is not None:
            self._pipeline.set_epoch(self._next_epoch)
            self.epoch = self._next_epoch
        elif state is None:
            self.epoch += 1
        self._next_epoch = None
        run = self._pipeline.iter(state=state)
        run.keep_state()  # state_dict() may be asked at any step: each quick
        self._run = run
        try:
            for element in run:
                yield to_torch(element)
        finally:
            if self._run is run:
                self._run = None

    def __len__(self):
        """Elements per epoch (batches, for a batching spec), when the spec says it: a ``range`` or an
        ``image_folder`` source, counts kept by every op after it (a ``shard`` with ``"in_step"``, the default under
        torchrun, keeps every rank's count equal by filling dropped places). Raises TypeError saying why when the
        count is only known by reading the data (TFRecord, text or tar files) or when the spec repeats forever."""
        top = [st for st in self._pipeline.stats() if not st["nested"]]
        root = top[-1]
        n = root["cardinality"]
        if n >= 0:
            return n
        if n == -2:
            raise TypeError(f"len(): the spec repeats forever ({root['path']} has no end)")
        unknown = next((st for st in top if st["cardinality"] == -1), root)
        raise TypeError(f"len(): the number of elements per epoch is not known before reading the data: "
                        f"{unknown['path']} ({unknown['op']}) makes a count the spec does not fix (records in files, "
                        f"a filter without a shard's \"in_step\"); count one epoch instead")

    def set_epoch(self, epoch):
        """The next iteration is epoch ``epoch`` (``DistributedSampler``'s convention): its order is a function of
        the spec's seed and the epoch, the same on every rank, so ``set_epoch(3)`` gives epoch 3's order."""
        if not isinstance(epoch, int) or epoch < 0:
            raise TypeError(f"set_epoch: expected an epoch number (an int >= 0), not {epoch!r}")
        self._next_epoch = epoch

    def state_dict(self):
        """Where the current iteration stands (torchdata's ``StatefulDataLoader`` protocol): ``{"epoch": n,
        "state": bytes or None}``, the state being the pipeline run's position (what this dataset has yielded, not
        what its threads made ahead; small and fast: docs/state.md). None between iterations."""
        run = self._run
        return {"epoch": self.epoch, "state": run.state() if run is not None else None}

    def load_state_dict(self, state_dict):
        """Makes the next iteration continue where ``state_dict()`` stood (in this process or a new one): the
        same elements in the same order for a spec with a seed."""
        if not isinstance(state_dict, dict) or "state" not in state_dict:
            raise TypeError("load_state_dict: expected the dict state_dict() returned ({'epoch': n, 'state': ...})")
        st = state_dict["state"]
        if st is not None and not isinstance(st, (bytes, bytearray, memoryview)):
            raise TypeError(f"load_state_dict: 'state' must be bytes or None, not {type(st).__name__}")
        self._resume = bytes(st) if st is not None else None
        if st is None and state_dict.get("epoch") is not None:
            self._next_epoch = int(state_dict["epoch"]) + 1
        else:
            self.epoch = int(state_dict.get("epoch", self.epoch))


# The bottleneck of an existing DataLoader and the settings that fix it (docs/python.md): the modules of this package,
# one per concern: record (the counters in every process that runs the dataset), tracer (a traced run), probe (the
# loader without workers, in a forked child), trace (the sluice trace), model, translate (the sluice spec), report,
# diagnosis (diagnose, tuned), cli (python -m sluice.torch diagnose).
from .common import DiagnoseError  # noqa: E402,F401
from .diagnosis import diagnose, tuned  # noqa: E402,F401
from .report import Report  # noqa: E402,F401
