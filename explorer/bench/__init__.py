"""Benchmarks: ``python -m explorer.bench.plan.<name>``."""
