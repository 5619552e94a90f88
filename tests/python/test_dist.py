# test_dist.py: the same spec under mpirun gives each rank its stream in the Python package, without linking MPI:
# shard "auto" reads Open MPI's OMPI_COMM_WORLD_SIZE/RANK (as torchrun's WORLD_SIZE/RANK), and by default pads
# the last round so that every rank makes the same number of steps; `offload` passes through in one process.
import sluice


def ranks_spec(extra=None):
    shard = {"op": "shard", "num_shards": "auto", "index": "auto"}
    shard.update(extra or {})
    return {"name": "ranks", "ops": [{"op": "range", "stop": 10}, shard, {"op": "offload"}]}


def values(spec):
    return [int(e["value"]) for e in sluice.Pipeline(spec)]


def test_ranks_from_open_mpi_variables(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")
    seen = []
    for rank in range(3):
        monkeypatch.setenv("OMPI_COMM_WORLD_RANK", str(rank))
        seen.append(values(ranks_spec({"remainder": "keep"})))
    assert sorted(sum(seen, [])) == list(range(10))
    padded = []
    for rank in range(3):
        monkeypatch.setenv("OMPI_COMM_WORLD_RANK", str(rank))
        padded.append(values(ranks_spec()))
    assert [len(p) for p in padded] == [4, 4, 4]  # the default under "auto": every rank the same count
    assert set(sum(padded, [])) == set(range(10))
