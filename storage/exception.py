"""The errors this project raises, under one root, as Hudi keeps its own in `org.apache.hudi.exception`.

Every error of `storage/`, `catalog/` and `sqlext/` is a `HoodieError`, so a user can catch ours apart from
Spark's (`except HoodieError`). Each also keeps the built-in class it always was (`ValueError` for rejected
input, `OSError` for file-system problems), so code that caught those goes on working.
"""
from __future__ import annotations


class HoodieError(Exception):
    """The root of every error raised by this project."""


class HoodieIOError(HoodieError, OSError):
    """A file-system or object-store operation failed."""


class HoodieFileAlreadyExistsError(HoodieIOError, FileExistsError):
    """A create-if-absent write found the file there already (another writer published it first)."""


class HoodieTableNotFoundError(HoodieError, FileNotFoundError):
    """The path is not a Hudi table (no readable `.hoodie/hoodie.properties`)."""


class HoodieConfigError(HoodieError, ValueError):
    """An option or table property has a value that does not parse for its key (names the key and value)."""


class HoodieCorruptedLogError(HoodieError):
    """A log file or block is malformed (bad framing, truncated content, undecodable records)."""


class HoodieAvroDecodeError(HoodieError, ValueError):
    """Avro bytes do not decode with the schema (corrupt data or a wrong schema)."""


class HoodieAvroEncodeError(HoodieError, ValueError):
    """A value does not fit the Avro schema it is written with."""


class HoodieKeyError(HoodieError, ValueError):
    """A record key or partition path cannot be produced (missing field, null or empty key)."""


class HoodieSchemaError(HoodieError, ValueError):
    """Data does not fit a table's schema."""


class HoodieSchemaCompatibilityError(HoodieSchemaError):
    """A write's schema cannot evolve the table's schema (an incompatible type change)."""


class HoodieSchemaConformError(HoodieSchemaError):
    """Stored records cannot be read into the table's current schema."""


class HoodieAvroSchemaError(HoodieSchemaError):
    """An Avro schema is malformed (an unknown type or name, a missing or wrong attribute)."""


class HoodieMergeError(HoodieError, ValueError):
    """Records cannot be merged (an unknown merge mode or payload, or ordering values that do not compare)."""


class HoodieReadError(HoodieError, ValueError):
    """A read was rejected: its options or the table's state do not allow it."""


class HoodieWriteError(HoodieError, ValueError):
    """A write was rejected; the table is unchanged."""


class HoodieDuplicateKeyError(HoodieWriteError):
    """A write that required unique keys met a record key twice in its batch, or a key stored in more than one
    place; raised before anything is written."""

    def __init__(self, message: str, record_key: str | None = None, count: int = 0):
        super().__init__(message)
        self.record_key, self.count = record_key, count


class HoodieIndexError(HoodieError, ValueError):
    """An index cannot be used as configured (an unknown `hoodie.index.type`, a base file outside any table)."""


class HoodieCompactionError(HoodieError, ValueError):
    """A compaction cannot be scheduled or run (no such plan, wrong state)."""


class HoodieCompactionExecutionError(HoodieError, ValueError):
    """A compaction task failed while rewriting a file slice."""


class HoodieCommitCallbackError(HoodieError):
    """A commit callback is misconfigured or could not deliver its message; reported in the write result,
    never failing the commit."""


class HoodieLockError(HoodieError, RuntimeError):
    """A table lock could not be acquired in time, released, or configured (names the provider and the lock)."""


class HoodieWriteConflictError(HoodieWriteError):
    """Optimistic concurrency control: a write touched file groups that an instant completed since it started
    also touched; the write was rolled back. Names the file groups and the winning instant."""

    def __init__(self, message: str, instant_time: str = "", winner: str = "",
                 file_groups: tuple[tuple[str, str], ...] = ()):
        super().__init__(message)
        self.instant_time, self.winner, self.file_groups = instant_time, winner, file_groups


class HoodieHeartbeatError(HoodieError, RuntimeError):
    """An instant's heartbeat belongs to another live process (it is running that instant)."""


class HoodieRollbackError(HoodieError, RuntimeError):
    """A rollback cannot run or resume (its plan is unreadable, its target is completed)."""


class HoodieTableStateError(HoodieWriteError):
    """A write found the table in a state it must not write to: a table version it does not write, a directory
    that is not a Hudi table, an unknown table type, an instant rolled back under it."""


class HoodieCorruptedMetadataError(HoodieError, ValueError):
    """A metadata file (an instant file, `hoodie.properties`) is damaged: it does not parse, or its checksum does
    not match; names the file."""


class HoodieMetadataNotAvailableError(HoodieError, LookupError):
    """The metadata table (or the partition of it a reader asked for) is not there or not enabled in the data
    table's `hoodie.table.metadata.partitions`: the caller lists storage instead."""


class HoodieTableServiceError(HoodieError, ValueError):
    """A table service (clean, archival, savepoint, restore) was rejected: bad options, a missing instant, a
    table version we do not write; nothing was changed."""


class HoodieCleanError(HoodieTableServiceError):
    """A clean cannot be planned or run (an unknown policy, a retention that breaks a rule)."""


class HoodieArchivalError(HoodieTableServiceError):
    """Archival cannot run as configured (`hoodie.keep.*` against `hoodie.cleaner.commits.retained`)."""


class HoodieSavepointError(HoodieTableServiceError):
    """A savepoint cannot be created or deleted (no such completed commit, already cleaned, not savepointed)."""


class HoodieRestoreError(HoodieTableServiceError):
    """A restore cannot run (no such savepoint or instant, the instant was archived)."""


class HoodieClusteringError(HoodieTableServiceError):
    """A clustering cannot be planned or run (unknown sort columns or layout strategy, no such pending plan, a
    conflict with a write that updated its file groups); the table is unchanged."""


class HoodieClusteringUpdateError(HoodieWriteError):
    """A write would update file groups a pending clustering rewrites (`hoodie.clustering.updates.strategy` =
    SparkRejectUpdateStrategy); nothing was written."""
