"""Planted DataLoaders for sluice.torch.diagnose (issue 39): each has one bottleneck by construction, which the
diagnosis must name. Used by tests/python/test_torch_diagnose.py (small) and bench/torch_diagnose.py (larger).

- "slow_step": a Compose of cheap steps with one that costs 15x each of them (the workers keep the cores busy);
- "few_workers": CPU-heavy samples on one worker process (the planner's budget has more cores than workers);
- "transfer": cheap, big batches of numpy arrays, pickled by value: the main process unpickles them one by one.
"""

import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


def spin(seconds):
    """Burns `seconds` of this thread's CPU (no sleeping: a worker's CPU time is what the diagnosis measures)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Spin:
    """A transform step costing `us` microseconds of CPU; returns its input."""

    def __init__(self, us):
        self.us = us

    def __call__(self, x):
        spin(self.us * 1e-6)
        return x


class Cheap(Spin):
    pass


class Slow(Spin):
    pass


class Samples(Dataset):
    """`n` samples (a small tensor and the index); `load_us` of CPU in __getitem__, then `transform`."""

    def __init__(self, n, load_us=0, transform=None):
        self.n, self.load_us, self.transform = n, load_us, transform

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        spin(self.load_us * 1e-6)
        x = torch.full((4,), float(i))
        return (self.transform(x) if self.transform is not None else x), i


class BigArrays(Dataset):
    """`n` ready-made batches: a float32 numpy array of `mb` megabytes each (the same array, so making one is
    free); a loader with batch_size=None and keep_numpy as collate sends each by value through the pipe."""

    def __init__(self, n, mb):
        self.n = n
        self.a = np.ones(int(mb * 1e6) // 4, np.float32)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.a


def keep_numpy(x):
    return x


def planted(kind, scale=1.0, **kw):
    """The planted loader `kind`; `scale` multiplies its dataset's length (its costs stay)."""
    if kind == "slow_step":
        from torchvision import transforms as T
        tf = T.Compose([Cheap(200), Slow(3000), Cheap(200)])
        return DataLoader(Samples(int(2000 * scale), transform=tf), batch_size=16, num_workers=kw.get("workers", 2))
    if kind == "few_workers":
        return DataLoader(Samples(int(4000 * scale), load_us=1000), batch_size=8, num_workers=kw.get("workers", 1))
    if kind == "transfer":
        return DataLoader(BigArrays(int(400 * scale), kw.get("mb", 8)), batch_size=None, collate_fn=keep_numpy,
                          num_workers=kw.get("workers", 2))
    raise ValueError(f"planted: no loader {kind!r}")
