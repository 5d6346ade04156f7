"""The metadata table's records: key encodings and file-group placement (`keys`), typed payloads and their Avro
form (`records`), and records in and out of HFiles (`hfile_io`)."""
