"""sluice.torch.loader: copies of a DataLoader with other settings; the CPU of the loader's own loop."""

import os as _os
import shutil as _shutil
import tempfile as _tempfile
import time as _time

from torch.utils.data import DataLoader as _DataLoader
from torch.utils.data import Dataset as _Dataset
from torch.utils.data import IterableDataset as _IterableDataset

from .record import _REC, _TimedCollate, _TracedIterable, _TracedMap


def _loader_args(loader):
    """The arguments that make a DataLoader like `loader` (same dataset, sampler and collate)."""
    kw = dict(dataset=loader.dataset, num_workers=loader.num_workers, collate_fn=loader.collate_fn,
              pin_memory=loader.pin_memory, timeout=loader.timeout, worker_init_fn=loader.worker_init_fn,
              multiprocessing_context=loader.multiprocessing_context, generator=loader.generator,
              persistent_workers=loader.persistent_workers)
    if loader.num_workers > 0:
        kw["prefetch_factor"] = loader.prefetch_factor
    if getattr(loader, "pin_memory_device", ""):
        kw["pin_memory_device"] = loader.pin_memory_device
    if isinstance(loader.dataset, _IterableDataset):
        kw.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:  # batch_size, or a batch_sampler given (then batch_size is None)
        kw["batch_sampler"] = loader.batch_sampler  # holds the sampler, the batch size and drop_last
    else:
        kw.update(batch_size=None, sampler=loader.sampler)
    return kw


def _make_loader(kw, **over):
    kw = dict(kw, **over)
    if kw["num_workers"] == 0:  # torch refuses these without workers
        kw.pop("prefetch_factor", None)
        kw["persistent_workers"] = False
        kw["multiprocessing_context"] = None
    return _DataLoader(**kw)


def _batch_size(loader):
    """Samples in a batch (1 without auto-collation; a custom batch_sampler without batch_size: 1, unknown)."""
    if loader.batch_size is not None:
        return loader.batch_size
    return getattr(loader.batch_sampler, "batch_size", None) or 1


class _NullMap(_Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return None


class _NullIterable(_IterableDataset):
    def __iter__(self):
        while True:
            yield None


def _null_collate(batch):
    return batch


def _loop_cpu(loader, cpu=0.03):
    """(the DataLoader's own CPU per batch in the main process without workers, the CPU per batch its probes report
    around a dataset and collate that do nothing): its sampler, fetch loop and iterator, with the loader's batching,
    over samples that cost nothing, untraced and then traced as diagnose traces (`cpu` seconds of each at most).
    num_workers=0 adds the first to the samples' work, which no worker measures (a worker's loop is another, priced
    in its hand-off); the second is the tracing's own, in every getitem and collate figure and in no untraced run."""
    iterable = isinstance(loader.dataset, _IterableDataset) or not hasattr(loader.dataset, "__len__")
    kw = dict(num_workers=0, collate_fn=_null_collate)
    if loader.batch_size is not None or loader.batch_sampler is not None:
        kw.update(batch_size=_batch_size(loader), drop_last=False)
    else:
        kw["batch_size"] = None
    tracedir = _tempfile.mkdtemp(prefix="sluice-torch-")
    out = []
    try:
        for traced in (False, True):
            ds = _NullIterable() if iterable else _NullMap(1 << 30)
            if traced:
                ds = (_TracedIterable if iterable else _TracedMap)(ds, tracedir)
            it = iter(_DataLoader(ds, **dict(kw, collate_fn=_TimedCollate(_null_collate, tracedir) if traced else
                                             _null_collate)))
            next(it)  # the iterator's start and the first batch's: not a batch's
            r = _REC.get(tracedir)
            steps0 = {k: v[1] for k, v in r.steps.items()} if traced else {}
            n, c0 = 0, _time.thread_time()
            while _time.thread_time() - c0 < cpu and n < 100000:
                next(it)
                n += 1
            c = (_time.thread_time() - c0) / max(n, 1)
            out.append(c if not traced else
                       sum(v[1] - steps0.get(k, 0.0) for k, v in _REC[tracedir].steps.items()) / max(n, 1))
    finally:
        r = _REC.pop(tracedir, None)
        if r is not None:
            fd, r.fd = r.fd, -1
            _os.close(fd)
        _shutil.rmtree(tracedir, ignore_errors=True)
    return out[0], out[1]
