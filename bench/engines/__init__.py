"""Engines under test. Each is a `Lane` factory: one table (per engine and table type) taken through the
workloads. Writers implement load/upsert/delete; readers (hudi-rs, plain Spark parquet) scan another lane's table."""
from bench.engines.base import Engine, ScanResult

__all__ = ["Engine", "ScanResult"]
