"""Benchmark suite (issue 6): our Hudi engine against delta-rs, pyiceberg, hudi-rs and the physical floor, on the
same deterministic data in the same run. `python -m bench --help`; entry point `bench.runner.run`; figures and
how to reproduce in bench/README.md.
"""
