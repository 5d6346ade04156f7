"""Record merging: how the versions of one record key across a base file and log blocks become one row."""
from storage.merge.merge_resolver import MergeSpec, resolve_merge_spec  # noqa: F401
from storage.merge.record_merger import RecordMergeMode, merge_records  # noqa: F401

__all__ = ["MergeSpec", "RecordMergeMode", "merge_records", "resolve_merge_spec"]
