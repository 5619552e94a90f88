"""sluice.prov: record what a training script consumed and produced in a provenance store (ML Metadata's
schema on SQLite or PostgreSQL), and ask the gate whether the next training run is worth it.

    store = sluice.prov.Store("runs.db")
    with store.record_run(pipeline) as run:          # consumed: the pipeline's input files
        train(...)
        run.produced("model.pt", type="Model")
    decision, probability = sluice.prov.should_train("runs.db", "imagenet", model="model.json")
"""

import os as _os
import time as _time

from . import _sluice
from ._sluice import StoreError

__all__ = ["Store", "Run", "should_train", "StoreError"]


def _pipeline_name(pipeline):
    if isinstance(pipeline, str):
        return pipeline
    name = getattr(pipeline, "name", None)
    if not name:
        raise TypeError("a pipeline name (str) or a sluice.Pipeline with a name")
    return name


class Run:
    """One recorded run (a context manager from Store.record_run): an execution of type ``kind`` in the
    pipeline's context with INPUT events from what it consumed and OUTPUT events to what it produced, COMPLETE or
    FAILED (with the exception's text) when the block ends."""

    def __init__(self, store, pipeline, kind, inputs, spec_path):
        self.store = store
        self.pipeline = _pipeline_name(pipeline)
        self.kind = kind
        self.inputs = list(inputs)
        if not isinstance(pipeline, str):
            self.inputs += pipeline.input_files()
        self.spec_path = spec_path if spec_path is not None else getattr(pipeline, "_path", None)
        self.outputs = []
        self.elements = 0  # set it to the elements consumed: the record then carries the throughput
        self.execution_id = None

    def consumed(self, *paths):
        """Adds input data files."""
        self.inputs += [_os.fspath(p) for p in paths]

    def produced(self, path, type="Model"):
        """Adds an output artifact (a file, e.g. a model) of artifact type ``type``."""
        self.outputs.append((_os.fspath(path), type))

    def __enter__(self):
        self._t0 = _time.time()
        self._cpu0 = _time.process_time()
        return self

    def __exit__(self, exc_type, exc, tb):
        elapsed = _time.time() - self._t0
        self.execution_id = _sluice.prov_record_run(
            self.store.uri, self.pipeline, kind=self.kind, spec_path=self.spec_path, inputs=self.inputs,
            outputs=[p for p, _ in self.outputs], output_types=[t for _, t in self.outputs],
            throughput=self.elements / elapsed if elapsed > 0 else 0.0, cpu_seconds=_time.process_time() - self._cpu0,
            elapsed=elapsed, failed=exc is not None, error=None if exc is None else f"{exc_type.__name__}: {exc}",
            start_ms=int(self._t0 * 1000))
        return False


class Store:
    """A provenance store: a SQLite path (created when missing), ``sqlite:PATH`` or a ``postgresql://`` URI.
    Raises StoreError with the library's message when it cannot be opened."""

    def __init__(self, uri):
        self.uri = _os.fspath(uri)
        self.backend = _sluice.prov_check(self.uri)  # "sqlite" or "postgresql"

    def record_run(self, pipeline, kind="sluice.Train", inputs=(), spec_path=None):
        """A context manager recording one run of a training script: ``pipeline`` is a sluice.Pipeline (its
        name and input files are recorded) or a pipeline name."""
        return Run(self, pipeline, kind, inputs, spec_path)

    def should_train(self, pipeline, model=None, threshold=-1.0):
        return should_train(self.uri, pipeline, model, threshold)

    def __repr__(self):
        return f"sluice.prov.Store({_sluice.redact(self.uri)!r})"  # never the password


def should_train(uri, pipeline, model=None, threshold=-1.0):
    """The gate: ``(decision, probability)`` for the next training run of ``pipeline`` (a name or a
    sluice.Pipeline) in the store at ``uri``: probability is P(push) from the predictor ``model`` (a file written by
    ``sluice prov train``) or, without one, the pipeline's smoothed push rate; decision is probability >=
    threshold (< 0: the model's own threshold, 0.1 without a model). The same answer as
    ``sluice prov should-train`` (exit 0: train, 10: skip)."""
    train, p_push, _ = _sluice.prov_should_train(_os.fspath(uri), _pipeline_name(pipeline),
                                                 model=None if model is None else _os.fspath(model),
                                                 threshold=threshold)
    return train, p_push
