"""bench/sections/: the sections of the benchmark suite, one module each, that bench/run runs in order (docs/benchmarks.md)."""
