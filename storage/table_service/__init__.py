"""Table services (compaction) that run beside writers on a Hudi table."""
