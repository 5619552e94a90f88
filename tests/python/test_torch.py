# test_torch.py: sluice.torch.Dataset in a DataLoader (tensors sharing the engine's memory, epoch after epoch),
# and per-rank shards from WORLD_SIZE/RANK that are disjoint and cover the dataset.
import os
import threading

import pytest

torch = pytest.importorskip("torch")

import sluice  # noqa: E402
import sluice.torch  # noqa: E402
from conftest import image_spec, parse_ops  # noqa: E402


def test_dataset_in_a_dataloader(data):
    ds = sluice.torch.Dataset(image_spec(data))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    batches = list(loader)
    assert len(batches) == 3
    img = batches[0]["image"]
    assert isinstance(img, torch.Tensor) and img.dtype == torch.float32 and tuple(img.shape) == (4, 32, 32, 3)
    assert isinstance(batches[0]["image/class/label"], torch.Tensor)
    # Epoch after epoch: the same elements, reshuffled.
    epoch2 = list(loader)
    labels = lambda bs: sorted(int(x) for b in bs for x in b["image/class/label"])  # noqa: E731
    assert labels(batches) == labels(epoch2)
    assert ds.epoch == 2


def test_tensors_share_the_engine_buffer(data):
    e = next(iter(sluice.Pipeline(image_spec(data))))
    t = sluice.torch.to_torch(e)["image"]
    assert t.data_ptr() == e["image"].ctypes.data
    base = e["image"].base
    assert isinstance(base, sluice._sluice.Buf)
    assert base.address <= t.data_ptr() < base.address + base.size


def test_epochs_reshuffle():
    ds = sluice.torch.Dataset({"seed": 5, "ops": [{"op": "range", "stop": 100}, {"op": "shuffle", "buffer": 100}]})
    a = [int(e["value"]) for e in ds]
    b = [int(e["value"]) for e in ds]
    assert sorted(a) == sorted(b) == list(range(100)) and a != b


def test_dataset_refuses_a_bad_spec():
    with pytest.raises(sluice.SpecError):
        sluice.torch.Dataset({"ops": [{"op": "range"}, {"op": "batch"}]})


def shard_spec(data):
    return {"name": "ranks", "seed": 11, "ops": [
        {"op": "files", "glob": str(data / "img" / "train-*.tfrecord"), "shuffle": True},
        {"op": "interleave", "cycle_length": 2, "source": [{"op": "tfrecord"}]},
        {"op": "shard", "num_shards": "auto", "index": "auto", "remainder": "keep"},  # exactly once
        parse_ops(),
        {"op": "shuffle", "buffer": 4}]}


def test_two_ranks_get_disjoint_shards_covering_the_dataset(data, monkeypatch):
    every = [bytes(e["image/encoded"]) for e in sluice.Pipeline({"ops": shard_spec(data)["ops"][:2] + [parse_ops()]})]
    seen = []
    for rank in (0, 1):
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", str(rank))
        ds = sluice.torch.Dataset(shard_spec(data))
        seen.append([e["image/encoded"] for e in torch.utils.data.DataLoader(ds, batch_size=None)])
    assert seen[0] and seen[1]
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == sorted(every)


def test_shard_auto_without_a_launcher_names_the_op(data, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(sluice.SpecError, match=r"ops\[2\]\.num_shards: \"auto\".*WORLD_SIZE is not set"):
        sluice.Pipeline(shard_spec(data))


def test_dataset_takes_pipeline_options_and_gives_nchw_batches(data):
    spec = image_spec(data, batch=4)
    for op in spec["ops"]:
        if op.get("fn") == "normalize":
            op["args"]["layout"] = "CHW"
    ds = sluice.torch.Dataset(spec, tune=True)  # the keywords of sluice.Pipeline
    assert ds.pipeline.tuner_fused() is not None
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=None)))
    assert batch["image"].shape == (4, 3, 32, 32) and batch["image"].is_contiguous()
    with pytest.raises(TypeError, match="built Pipeline"):
        sluice.torch.Dataset(ds.pipeline, tune=True)


RANGE_BATCHED = {"ops": [{"op": "range", "stop": 20}, {"op": "batch", "size": 4}]}


@pytest.mark.parametrize("kw, said", [({}, "batch_size=1"), ({"batch_size": 4}, "batch_size=4"),
                                      ({"batch_size": 2, "num_workers": 1}, "batch_size=2")])
def test_a_loader_that_batches_the_specs_batches_again_is_refused(kw, said):
    """A DataLoader with a batch_size (DataLoader(ds) has 1) would stack the spec's batches into batches of batches:
    refused at its first batch (in a worker too), the fix in the message. (torch refuses a batch_sampler with an
    IterableDataset itself.)"""
    it = iter(torch.utils.data.DataLoader(sluice.torch.Dataset(RANGE_BATCHED), **kw))
    try:
        with pytest.raises(sluice.Error) as e:
            next(it)
        text = str(e.value)
        del e  # its traceback holds the loader's iterator
    finally:
        if hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()  # the worker now; its queues' feeder threads end by themselves: waited for, so
        del it                      # that the next test's count of threads is not one short
        for t in threading.enumerate():
            if t.name == "QueueFeederThread":
                t.join(timeout=30)
    assert said in text and "batch_size=None" in text and "of the spec's batches of 4" in text


def test_a_loader_may_batch_a_spec_without_a_batch_op_and_len_counts_what_the_loader_yields():
    ds = sluice.torch.Dataset({"ops": [{"op": "range", "stop": 10}]})
    assert [b["value"].tolist() for b in torch.utils.data.DataLoader(ds, batch_size=4)] == \
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    # len(): the elements the spec yields an epoch, what DataLoader(batch_size=None) yields: the steps of an epoch
    ds = sluice.torch.Dataset({"ops": [{"op": "range", "stop": 10}, {"op": "batch", "size": 4}]})
    loader = torch.utils.data.DataLoader(ds, batch_size=None)
    assert len(ds) == len(loader) == len(list(loader)) == 3
    ds = sluice.torch.Dataset({"ops": [{"op": "range", "stop": 10}, {"op": "batch", "size": 4, "drop_remainder": True}]})
    assert len(ds) == len(list(ds)) == 2
