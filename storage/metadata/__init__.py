"""The metadata table's records: key encodings and file-group placement (`keys`), typed payloads and their Avro
form (`records`), records in and out of HFiles (`hfile_io`), reading a data table's metadata table: listings and
statistics, merged as Hudi merges them (`table_metadata`), and writing it in step with the data table: column
statistics of data files (`column_stats`), creation, initialisation, deltacommits, rollbacks and compaction
(`metadata_writer`)."""
