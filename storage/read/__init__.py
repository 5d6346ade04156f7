"""Readers: snapshot, read-optimized, time travel and incremental queries as Spark DataFrames."""
from storage.read.reader import HoodieReadError, read_table  # noqa: F401
