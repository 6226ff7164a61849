"""The peers benchmark (benchmarks/maintained/bench_peers.py): its inputs, its jobs, and one adapter per system."""
