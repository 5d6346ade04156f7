"""Storage access: the file system under a table, and parquet base files."""
