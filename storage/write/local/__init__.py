"""The in-process engine's steps of a write (Hudi's Java write client beside the Spark one): the same prepare ->
locate -> write -> commit as storage.write.write_operation, on an Arrow table in this process instead of a Spark
DataFrame. The driver's planning (bucket plan, task context, commit) and the task bodies (storage.write.handle)
are shared with the Spark path; only the data-parallel steps are spelled in pyarrow compute here."""
