"""Indexes: where does each incoming record key live? (Hudi's HoodieIndex: tagLocation)

An index tags incoming records with the file group that holds their key. SIMPLE / GLOBAL_SIMPLE join incoming
keys against every key read from the latest base files; BLOOM / GLOBAL_BLOOM (the default, as in Hudi) first
prune files by footer key ranges and bloom filters, then check the remaining keys exactly; BUCKET hashes each
key to a bucket whose file group is named after it (no lookup, bucket_index.py); RECORD_INDEX (global) reads each
key's shard of the metadata table's record_index (record_level_index.py). New index types register in
`INDEXES` (index_factory.py).
"""
from storage.index.hoodie_index import LOC_FILE_ID, LOC_PARTITION, HoodieIndex  # noqa: F401
from storage.index.index_factory import INDEXES, create_index  # noqa: F401
