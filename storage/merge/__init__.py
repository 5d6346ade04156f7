"""Record merging: how the versions of one record key across a base file and log blocks become one row."""
from storage.merge.record_merger import RecordMergeMode, merge_records, resolve_merge_mode  # noqa: F401
