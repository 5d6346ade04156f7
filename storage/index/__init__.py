"""Indexes: where does each incoming record key live? (seed "upsert flow", index types)

An index tags incoming records with the file group that holds their key. SIMPLE and GLOBAL_SIMPLE join
incoming keys against keys read from the latest base files, in Spark. New index types register in
`INDEXES` (bloom, bucket and record-level indexes come later).
"""
from storage.index.simple_index import INDEXES, HoodieIndex, create_index  # noqa: F401
