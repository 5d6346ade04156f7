"""The write client (Hudi's BaseHoodieWriteClient): the entry point for writes to a table, above both the write
path and the table services, which it runs around each write."""
