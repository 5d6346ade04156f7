"""Typed configuration: every `hoodie.*` key this engine knows, with Apache Hudi's default and a parser.

One place for keys and defaults, as hudi-rs does with its config enums, so option handling is never
re-implemented ad hoc. `HoodieConfig` wraps user options (strings, as Spark passes them) and answers
typed values. `REGISTRY` collects every key class; `validate_options` checks the `hoodie.*` options a write or
read is given (and the TBLPROPERTIES of SQL) against it: a near miss of a key option (`KEY_OPTIONS`: record key,
ordering field, partition path, key generator, table type, and their SQL names) is an error naming the key meant;
an unknown key (the closest known key is named) or a key this engine knows but does not honour warns every time
it is given, `hoodie.strict.config=true` makes those errors, and a value its parser rejects is an error naming
the key.
"""
from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

from storage.exception import HoodieConfigError

log = logging.getLogger(__name__)

T = TypeVar("T")


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def parse_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


WRITABLE_TABLE_VERSIONS = (6, 8, 9)


def parse_table_version(value: Any) -> int:
    version = int(str(value).strip())
    if version not in WRITABLE_TABLE_VERSIONS:
        raise ValueError(f"table version {version} is not written here: expected one of "
                         f"{', '.join(map(str, WRITABLE_TABLE_VERSIONS))}")
    return version


@dataclass(frozen=True)
class OneOf:
    """A parser accepting one of `choices` (any case), answering it upper-cased."""

    choices: tuple[str, ...]

    def __call__(self, value: Any) -> str:
        text = str(value).strip().upper()
        if text not in self.choices:
            raise ValueError(f"expected one of {', '.join(self.choices)}")
        return text


@dataclass(frozen=True)
class ConfigProperty(Generic[T]):
    key: str
    default: T | None
    parser: Callable[[Any], T] = str  # type: ignore[assignment]
    alternatives: tuple[str, ...] = ()
    doc: str = ""
    honoured: bool = True  # False: known (Hudi's key) but no code here acts on it; giving it warns

    def keys(self) -> tuple[str, ...]:
        return (self.key, *self.alternatives)

    def parse(self, value: Any, given_as: str | None = None) -> T | None:
        """`value` parsed; an error naming the key (as given) when the parser rejects it."""
        if value is None or (value == "" and self.parser is not str):
            return self.default
        try:
            return self.parser(value)
        except (TypeError, ValueError) as exc:
            raise HoodieConfigError(f"invalid value {value!r} for option {given_as or self.key}: {exc}") from None


def _prop(key: str, default: Any, parser: Callable[[Any], Any] = str, *alternatives: str, doc: str = "",
          honoured: bool = True) -> ConfigProperty:
    return ConfigProperty(key, default, parser, tuple(alternatives), doc, honoured)


def _ignored(key: str, default: Any, parser: Callable[[Any], Any], why: str, *alternatives: str) -> ConfigProperty:
    """A key Hudi defines that this engine accepts without effect (`why` says what happens instead)."""
    return _prop(key, default, parser, *alternatives, doc=f"not honoured here: {why}", honoured=False)


class TableConfigKeys:
    """Keys of `.hoodie/hoodie.properties`."""

    NAME = _prop("hoodie.table.name", None, str, "hoodie.datasource.write.table.name")
    TYPE = _prop("hoodie.table.type", "COPY_ON_WRITE", str)
    VERSION = _prop("hoodie.table.version", 6, int)
    INITIAL_VERSION = _prop("hoodie.table.initial.version", None, int,
                            doc="the version the table was created at (table version 8+ records it)")
    TIMELINE_LAYOUT_VERSION = _prop("hoodie.timeline.layout.version", 1, int)
    TIMELINE_PATH = _prop("hoodie.timeline.path", "timeline", str)
    TIMELINE_HISTORY_PATH = _prop("hoodie.timeline.history.path", "history", str,
                                  doc="table version 8+: the LSM archived timeline's folder, under the timeline path "
                                      "(storage/timeline/lsm_timeline.py)")
    ARCHIVELOG_FOLDER = _prop("hoodie.archivelog.folder", "archived", str)
    RECORDKEY_FIELDS = _prop("hoodie.table.recordkey.fields", None, parse_list)
    PRECOMBINE_FIELD = _prop("hoodie.table.precombine.field", None, str, "hoodie.table.ordering.fields")
    ORDERING_FIELDS = _prop("hoodie.table.ordering.fields", None, str,
                            doc="table version 9's name of the ordering (precombine) field")
    PARTITION_FIELDS = _prop("hoodie.table.partition.fields", None, parse_list)
    KEYGEN_CLASS = _prop("hoodie.table.keygenerator.class", None, str)
    KEYGEN_TYPE = _prop("hoodie.table.keygenerator.type", None, str)
    HIVE_STYLE_PARTITIONING = _prop("hoodie.datasource.write.hive_style_partitioning", False, parse_bool)
    URL_ENCODE_PARTITIONING = _prop("hoodie.datasource.write.partitionpath.urlencode", False, parse_bool)
    DROP_PARTITION_COLUMNS = _prop("hoodie.datasource.write.drop.partition.columns", False, parse_bool)
    POPULATE_META_FIELDS = _prop("hoodie.populate.meta.fields", True, parse_bool)
    DATABASE_NAME = _prop("hoodie.database.name", "default", str)
    CREATE_SCHEMA = _prop("hoodie.table.create.schema", None, str)
    CHECKSUM = _prop("hoodie.table.checksum", None, int)
    PAYLOAD_CLASS = _prop("hoodie.compaction.payload.class", "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
                          str, "hoodie.table.payload.class",
                          doc="the table's payload class: how records of one key merge (storage.merge.merge_resolver)")
    LEGACY_PAYLOAD_CLASS = _prop("hoodie.legacy.payload.class", None, str,
                                 doc="table version 9: the payload class a table upgraded from version 8 used (its "
                                     "merge mode now says how records merge); restored by a downgrade")
    RECORD_MERGE_STRATEGY_ID = _prop("hoodie.record.merge.strategy.id", None, str,
                                     doc="table version 8: the merger of the merge mode (Hudi's fixed ids)")
    TABLE_FORMAT = _prop("hoodie.table.format", "native", str, doc="table version 9: always native here")
    RECORD_MERGE_MODE = _prop("hoodie.record.merge.mode", None, OneOf(("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING")),
                              doc="EVENT_TIME_ORDERING | COMMIT_TIME_ORDERING (Hudi's CUSTOM mergers are not "
                                  "supported); unset: inferred from the payload class (storage.merge.merge_resolver)")
    TIMELINE_TIMEZONE = _ignored("hoodie.table.timeline.timezone", "UTC", str, "instant times are always UTC")
    BASE_FILE_FORMAT = _ignored("hoodie.table.base.file.format", "PARQUET", str, "base files are always parquet")
    LOG_FILE_FORMAT = _ignored("hoodie.table.log.file.format", "HOODIE_LOG", str, "log files are always Hudi's log format")
    METADATA_PARTITIONS = _prop("hoodie.table.metadata.partitions", None, str,
                                doc="the metadata table partitions readers may use (files, column_stats, "
                                    "partition_stats are kept in step by writers with hoodie.metadata.enable=true: "
                                    "storage.metadata.metadata_writer; a writer with it disabled removes the "
                                    "metadata table and clears this list)")
    METADATA_PARTITIONS_INFLIGHT = _prop("hoodie.table.metadata.partitions.inflight", None, str,
                                         doc="metadata table partitions being built (empty: a partition is built "
                                             "before it is listed in hoodie.table.metadata.partitions)")
    INDEX_DEFS_PATH = _prop("hoodie.table.index.defs.path", None, str,
                            doc="table versions 8/9: the index definitions file (Hudi 1.x: .hoodie/.index_defs/"
                                "index.json) naming each metadata-table index and its source columns; a writer "
                                "keeping column_stats indexes the columns its column_stats definition names "
                                "unless hoodie.metadata.index.column.stats.column.list says otherwise")


class WriteConfigKeys:
    """Writer options (Spark datasource names, as Apache Hudi spells them)."""

    TABLE_NAME = _prop("hoodie.table.name", None, str, "hoodie.datasource.write.table.name")
    WRITE_TABLE_VERSION = _prop("hoodie.write.table.version", 6, parse_table_version,
                                doc="the table version a new table is created at: 6, 8 or 9 (an existing table's "
                                    "own version decides every later write; CALL upgrade_table changes it)")
    OPERATION = _prop("hoodie.datasource.write.operation", "upsert", str,
                      doc="upsert | insert | bulk_insert | delete | insert_overwrite | insert_overwrite_table")
    TABLE_TYPE = _prop("hoodie.datasource.write.table.type", "COPY_ON_WRITE", str,
                       doc="COPY_ON_WRITE | MERGE_ON_READ, fixed when the table is created")
    RECORDKEY_FIELD = _prop("hoodie.datasource.write.recordkey.field", None, parse_list,
                            doc="the record key column(s), comma-separated")
    PRECOMBINE_FIELD = _prop("hoodie.datasource.write.precombine.field", None, str, "hoodie.table.ordering.fields",
                             doc="the ordering column: the larger value wins within a batch and, under event-time "
                                 "ordering, against the stored record")
    PARTITIONPATH_FIELD = _prop("hoodie.datasource.write.partitionpath.field", None, parse_list,
                                doc="the partition column(s), comma-separated (none: a non-partitioned table)")
    KEYGENERATOR_CLASS = _prop("hoodie.datasource.write.keygenerator.class", None, str)
    KEYGENERATOR_TYPE = _prop("hoodie.datasource.write.keygenerator.type", None, str)
    HIVE_STYLE_PARTITIONING = _prop("hoodie.datasource.write.hive_style_partitioning", False, parse_bool)
    URL_ENCODE_PARTITIONING = _prop("hoodie.datasource.write.partitionpath.urlencode", False, parse_bool)
    PAYLOAD_CLASS = _prop("hoodie.datasource.write.payload.class", None, str, "hoodie.compaction.payload.class",
                          doc="DefaultHoodieRecordPayload / EventTimeAvroPayload (event time) or "
                              "OverwriteWithLatestAvroPayload (commit time): see hoodie.record.merge.mode")
    COMBINE_BEFORE_UPSERT = _prop("hoodie.combine.before.upsert", True, parse_bool)
    COMBINE_BEFORE_INSERT = _prop("hoodie.combine.before.insert", False, parse_bool)
    COMBINE_BEFORE_DELETE = _prop("hoodie.combine.before.delete", True, parse_bool)
    INDEX_TYPE = _prop("hoodie.index.type", "BLOOM", str,
                       doc="BLOOM | GLOBAL_BLOOM | SIMPLE | GLOBAL_SIMPLE | BUCKET (a BUCKET table records its index "
                           "settings in hoodie.properties) | RECORD_INDEX (global: the metadata table's record_index "
                           "partition, GLOBAL_SIMPLE while the table has none)")
    INDEX_BUCKET_ENGINE = _prop("hoodie.index.bucket.engine", "SIMPLE", str,
                                doc="SIMPLE (a fixed number of buckets per partition); CONSISTENT_HASHING is not supported")
    BUCKET_INDEX_NUM_BUCKETS = _prop("hoodie.bucket.index.num.buckets", 256, int,
                                     doc="buckets (file groups) per partition of a BUCKET index table; fixed once "
                                         "the table has data")
    BUCKET_INDEX_HASH_FIELD = _prop("hoodie.bucket.index.hash.field", None, parse_list,
                                    doc="the record key fields hashed to a bucket (a subset of the record key; "
                                        "default: all of them)")
    SIMPLE_INDEX_UPDATE_PARTITION_PATH = _prop("hoodie.simple.index.update.partition.path", True, parse_bool)
    BLOOM_INDEX_UPDATE_PARTITION_PATH = _prop("hoodie.bloom.index.update.partition.path", True, parse_bool)
    RECORD_INDEX_UPDATE_PARTITION_PATH = _prop(
        "hoodie.record.index.update.partition.path", False, parse_bool,
        doc="RECORD_INDEX: a record whose partition path changed moves to the new partition (true) or is updated "
            "in the partition that holds it (false, Hudi's default); partitioned tables only")
    BLOOM_INDEX_PRUNE_BY_RANGES = _prop("hoodie.bloom.index.prune.by.ranges", True, parse_bool)
    BLOOM_INDEX_USE_CACHING = _prop("hoodie.bloom.index.use.caching", True, parse_bool)
    BLOOM_INDEX_PARALLELISM = _prop("hoodie.bloom.index.parallelism", 0, int)
    BLOOM_INDEX_USE_METADATA = _prop(
        "hoodie.bloom.index.use.metadata", False, parse_bool,
        doc="BLOOM / GLOBAL_BLOOM: read the files' bloom filters from the metadata table's bloom_filters partition "
            "and their key ranges from column_stats (of _hoodie_record_key) instead of the files' footers, where "
            "the metadata table has them")
    ALLOW_EMPTY_COMMIT = _prop("hoodie.allow.empty.commit", True, parse_bool)
    PARQUET_SMALL_FILE_LIMIT = _prop("hoodie.parquet.small.file.limit", 104857600, int)
    PARQUET_MAX_FILE_SIZE = _prop("hoodie.parquet.max.file.size", 125829120, int)
    MERGE_SMALL_FILE_GROUP_CANDIDATES_LIMIT = _prop(
        "hoodie.merge.small.file.group.candidates.limit", 1, int,
        doc="merge-on-read: how many small file slices per partition may take inserts (Hudi's delta-commit "
            "partitioner)")
    PARQUET_COMPRESSION_CODEC = _prop("hoodie.parquet.compression.codec", "snappy", str)
    PARQUET_BLOCK_SIZE = _prop("hoodie.parquet.block.size", 125829120, int)
    RECORD_SIZE_ESTIMATION_THRESHOLD = _prop("hoodie.record.size.estimation.threshold", 1.0, float)
    COPY_ON_WRITE_RECORD_SIZE_ESTIMATE = _prop("hoodie.copyonwrite.record.size.estimate", 1024, int)
    COPY_ON_WRITE_INSERT_SPLIT_SIZE = _prop("hoodie.copyonwrite.insert.split.size", 500000, int)
    COPY_ON_WRITE_INSERT_AUTO_SPLIT = _prop("hoodie.copyonwrite.insert.auto.split", True, parse_bool)
    BLOOM_FILTER_TYPE = _prop("hoodie.bloom.index.filter.type", "DYNAMIC_V0", str)
    BLOOM_NUM_ENTRIES = _prop("hoodie.index.bloom.num_entries", 60000, int)
    BLOOM_FPP = _prop("hoodie.index.bloom.fpp", 1e-9, float)
    BLOOM_DYNAMIC_MAX_ENTRIES = _prop("hoodie.bloom.index.filter.dynamic.max.entries", 100000, int)
    POPULATE_META_FIELDS = _prop("hoodie.populate.meta.fields", True, parse_bool)
    DATABASE_NAME = _prop("hoodie.database.name", "default", str)
    SCHEMA_ALLOW_AUTO_EVOLUTION_COLUMN_DROP = _ignored(
        "hoodie.datasource.write.schema.allow.auto.evolution.column.drop", False, parse_bool,
        "columns are never dropped by a write: a batch without some columns is rejected, or writes nulls with "
        "hoodie.write.set.null.for.missing.columns")
    BULKINSERT_SORT_MODE = _prop(
        "hoodie.bulkinsert.sort.mode", "NONE",
        OneOf(("NONE", "GLOBAL_SORT", "PARTITION_SORT", "PARTITION_PATH_REPARTITION")),
        doc="NONE: input order; GLOBAL_SORT: each partition's records split into files by record key range, each "
            "file sorted; PARTITION_SORT: each file sorted by record key; PARTITION_PATH_REPARTITION: as NONE "
            "(files never mix partitions here)")
    UPSERT_SHUFFLE_PARALLELISM = _prop("hoodie.upsert.shuffle.parallelism", 0, int,
                                       doc="tasks of the upsert's dedup shuffle (0: Spark's shuffle partitions)")
    INSERT_SHUFFLE_PARALLELISM = _prop("hoodie.insert.shuffle.parallelism", 0, int,
                                       doc="tasks of the insert's dedup shuffle (0: Spark's shuffle partitions)")
    BULKINSERT_SHUFFLE_PARALLELISM = _prop("hoodie.bulkinsert.shuffle.parallelism", 0, int,
                                           doc="tasks the bulk insert input is repartitioned into, or of its dedup "
                                               "(0: the input's partitions)")
    DELETE_SHUFFLE_PARALLELISM = _prop("hoodie.delete.shuffle.parallelism", 0, int,
                                       doc="tasks of the delete's dedup shuffle (0: Spark's shuffle partitions)")
    ROLLBACK_USING_MARKERS = _ignored("hoodie.rollback.using.markers", True, parse_bool,
                                      "failed writes are always rolled back through their markers")
    STRICT_CONFIG = _prop("hoodie.strict.config", False, parse_bool,
                          doc="this engine's: unknown or not honoured hoodie.* options fail the write or read "
                              "instead of warning")
    WRITE_CONCURRENCY_MODE = _prop("hoodie.write.concurrency.mode", "SINGLE_WRITER", str)
    FAILED_WRITES_CLEANER_POLICY = _prop(
        "hoodie.cleaner.policy.failed.writes", None, str,
        doc="EAGER (roll back failed writes before each write; single writer) or LAZY (only writes whose heartbeat "
            "expired; multi-writer); unset: LAZY under optimistic concurrency control, EAGER otherwise, as Hudi infers")
    SET_NULL_FOR_MISSING_COLUMNS = _prop(
        "hoodie.write.set.null.for.missing.columns", False, parse_bool,
        doc="a batch without some of the table's columns writes nulls for them instead of being rejected")
    CLIENT_HEARTBEAT_INTERVAL_MS = _prop("hoodie.client.heartbeat.interval_in_ms", 60000, int)
    CLIENT_HEARTBEAT_TOLERABLE_MISSES = _prop("hoodie.client.heartbeat.tolerable.misses", 2, int)
    MERGE_MAX_SIZE = _prop(
        "hoodie.memory.merge.max.size", 1024 * 1024 * 1024, int,
        doc="HoodieMemoryConfig's merge budget in bytes: a copy-on-write merge of a base file larger than this "
            "streams the file one row group at a time instead of loading it whole")


class LockConfigKeys:
    """Apache Hudi's lock options (`HoodieLockConfig` / `LockConfiguration`), used by storage/transaction/."""

    _P = "hoodie.write.lock."
    PROVIDER = _prop(_P + "provider", "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider", str)
    CONFLICT_RESOLUTION_STRATEGY = _prop(
        _P + "conflict.resolution.strategy",
        "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy", str)
    WAIT_TIME_MS = _prop(_P + "wait_time_ms", 60000, int,
                         doc="how long one acquire at the lock provider may wait")
    RETRY_WAIT_TIME_MS = _prop(_P + "wait_time_ms_between_retry", 1000, int,
                               doc="ZooKeeper provider: first back-off of its client's retries after a lost "
                                   "connection (doubling up to max_wait_time_ms_between_retry), as Curator's "
                                   "BoundedExponentialBackoffRetry; storage-based and DynamoDB providers: pause "
                                   "between looks at a held lock. The lock manager retries with "
                                   "hoodie.write.lock.client.*")
    RETRY_MAX_WAIT_TIME_MS = _prop(_P + "max_wait_time_ms_between_retry", 16000, int,
                                   doc="ZooKeeper provider: longest back-off between its client's retries")
    NUM_RETRIES = _prop(_P + "num_retries", 15, int,
                        doc="ZooKeeper provider: retries of one ZooKeeper request after a lost connection (never "
                            "past the acquire's wait)")
    CLIENT_RETRY_WAIT_TIME_MS = _prop(_P + "client.wait_time_ms_between_retry", 5000, int)
    CLIENT_NUM_RETRIES = _prop(_P + "client.num_retries", 50, int)
    HEARTBEAT_INTERVAL_MS = _prop(_P + "heartbeat_interval_ms", 60000, int)
    FILESYSTEM_PATH = _prop(_P + "filesystem.path", None, str)
    FILESYSTEM_EXPIRE_MINUTES = _prop(_P + "filesystem.expire", 0, int)
    HIVE_DATABASE = _prop(_P + "hivemetastore.database", None, str)
    HIVE_TABLE = _prop(_P + "hivemetastore.table", None, str)
    HIVE_METASTORE_URIS = _prop(_P + "hivemetastore.uris", None, str)
    # ZookeeperBasedLockProvider (Hudi's LockConfiguration / HoodieLockConfig)
    ZK_URL = _prop(_P + "zookeeper.url", None, str, doc="ZooKeeper connect string: host[:port][,host[:port]...]")
    ZK_PORT = _prop(_P + "zookeeper.port", None, int, doc="port for the hosts of zookeeper.url that name none")
    ZK_BASE_PATH = _prop(_P + "zookeeper.base_path", None, str,
                         doc="znode under which the lock znodes live; the same for every writer of the table")
    ZK_LOCK_KEY = _prop(_P + "zookeeper.lock_key", None, str,
                        doc="lock znode name under base_path (default: the table name)")
    ZK_SESSION_TIMEOUT_MS = _prop(_P + "zookeeper.session_timeout_ms", 60000, int,
                                  doc="a holder unheard of for this long loses its session, and so the lock")
    ZK_CONNECTION_TIMEOUT_MS = _prop(_P + "zookeeper.connection_timeout_ms", 15000, int,
                                     doc="how long to wait for a connection before the lock fails as unreachable")
    # DynamoDBBasedLockProvider (Hudi's DynamoDbBasedLockConfig); the lease lasts hoodie.write.lock.wait_time_ms
    DYNAMODB_TABLE = _prop(_P + "dynamodb.table", "hudi_locks", str, doc="DynamoDB table holding the lock items")
    DYNAMODB_PARTITION_KEY = _prop(_P + "dynamodb.partition_key", None, str,
                                   doc="the lock item's key, one per Hudi table (default: the table name)")
    DYNAMODB_REGION = _prop(_P + "dynamodb.region", "us-east-1", str, doc="default: AWS_REGION, else us-east-1")
    DYNAMODB_BILLING_MODE = _prop(_P + "dynamodb.billing_mode", "PAY_PER_REQUEST",
                                  OneOf(("PAY_PER_REQUEST", "PROVISIONED")))
    DYNAMODB_READ_CAPACITY = _prop(_P + "dynamodb.read_capacity", 20, int, doc="PROVISIONED billing only")
    DYNAMODB_WRITE_CAPACITY = _prop(_P + "dynamodb.write_capacity", 10, int, doc="PROVISIONED billing only")
    DYNAMODB_TABLE_CREATION_TIMEOUT = _prop(_P + "dynamodb.table_creation_timeout", 120000, int,
                                            doc="ms to wait for a lock table this provider creates to turn ACTIVE")
    DYNAMODB_ENDPOINT_URL = _prop(_P + "dynamodb.endpoint_url", None, str,
                                  doc="DynamoDB endpoint (default: the region's AWS endpoint)")
    AWS_ACCESS_KEY = _prop("hoodie.aws.access.key", None, str,
                           doc="DynamoDB lock credentials (Hudi's HoodieAWSConfig); unset: AWS's default chain")
    AWS_SECRET_KEY = _prop("hoodie.aws.secret.key", None, str)
    AWS_SESSION_TOKEN = _prop("hoodie.aws.session.token", None, str)
    # StorageBasedLockProvider (Hudi 1.1's StorageBasedLockConfig)
    STORAGE_VALIDITY_TIMEOUT_SECS = _prop(_P + "storage.validity.timeout.secs", 300.0, float,
                                          doc="how long a lock file stays valid unless its holder renews it")
    STORAGE_HEARTBEAT_POLL_SECS = _prop(_P + "storage.heartbeat.poll.secs", 30.0, float,
                                        doc="how often the holder renews its lock file (at most a tenth of the "
                                            "validity)")


class ReadConfigKeys:
    """Reader options (Spark datasource names, as Apache Hudi spells them), used by storage/read/."""

    QUERY_TYPE = _prop("hoodie.datasource.query.type", "snapshot", str,
                       doc="snapshot | read_optimized (base files only) | incremental")
    AS_OF_INSTANT = _prop("as.of.instant", None, str, "hoodie.datasource.read.as.of.instant")
    BEGIN_INSTANTTIME = _prop("hoodie.datasource.read.begin.instanttime", None, str)
    END_INSTANTTIME = _prop("hoodie.datasource.read.end.instanttime", None, str)
    INCR_FALLBACK_FULLSCAN = _prop("hoodie.datasource.read.incr.fallback.fulltablescan.enable", False, parse_bool)
    ENABLE_DATA_SKIPPING = _prop("hoodie.enable.data.skipping", True, parse_bool,
                                 doc="a read's filters prune file slices by the metadata table's column_stats and "
                                     "partition_stats (storage/read/data_skipping.py) when the table keeps them")
    EXTRACT_PARTITION_VALUES_FROM_PATH = _prop(
        "hoodie.datasource.read.extract.partition.values.from.path", False, parse_bool,
        doc="partition columns take their values from the partition path instead of the data files")


class TimestampKeyGeneratorKeys:
    """TimestampBasedKeyGenerator options (Hudi's TimestampKeyGeneratorConfig; the `hoodie.deltastreamer.`
    spellings are its deprecated alternatives). Timezones default to UTC, as hudi-rs assumes."""

    PREFIX = "hoodie.keygen.timebased."  # the family, as a new table keeps it in hoodie.properties
    _OLD = "hoodie.deltastreamer.keygen.timebased."
    TIMESTAMP_TYPE = _prop("hoodie.keygen.timebased.timestamp.type", None, str, _OLD + "timestamp.type")
    SCALAR_TIME_UNIT = _prop("hoodie.keygen.timebased.timestamp.scalar.time.unit", "SECONDS", str,
                             _OLD + "timestamp.scalar.time.unit")
    INPUT_DATE_FORMAT = _prop("hoodie.keygen.timebased.input.dateformat", "", str, _OLD + "input.dateformat")
    INPUT_DATE_FORMAT_LIST_DELIMITER_REGEX = _prop("hoodie.keygen.timebased.input.dateformat.list.delimiter.regex",
                                                   ",", str, _OLD + "input.dateformat.list.delimiter.regex")
    INPUT_TIMEZONE = _prop("hoodie.keygen.timebased.input.timezone", "UTC", str, _OLD + "input.timezone")
    OUTPUT_DATE_FORMAT = _prop("hoodie.keygen.timebased.output.dateformat", "", str, _OLD + "output.dateformat")
    OUTPUT_TIMEZONE = _prop("hoodie.keygen.timebased.output.timezone", "UTC", str, _OLD + "output.timezone")
    TIMEZONE = _prop("hoodie.keygen.timebased.timezone", None, str, _OLD + "timezone",
                     doc="input and output timezone at once; wins over the two above, as in Hudi")


@dataclass(frozen=True)
class HoodieConfig:
    """User options as given (string to string), answering typed values for `ConfigProperty` keys.

    The one form options take inside storage/: the entry points (sqlext/, catalog/) wrap what the user gave with
    `of` and pass the config down; an optional config defaults to an empty `HoodieConfig()`. Where a table's
    properties meet the options, `HoodieTableConfig.with_options` (storage/table/table_config.py) layers them."""

    props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, *sources: Mapping[str, Any] | None) -> "HoodieConfig":
        """The options of `sources` merged, later ones winning; values as text (booleans true / false, lists
        comma-separated), None values left out."""
        merged: dict[str, str] = {}
        for source in sources:
            for key, value in (source or {}).items():
                if value is not None:
                    merged[str(key)] = value if isinstance(value, str) else _to_text(value)
        return cls(merged)

    def contains(self, prop: ConfigProperty) -> bool:
        return any(k in self.props for k in prop.keys())

    def raw(self, prop: ConfigProperty) -> str | None:
        for key in prop.keys():
            if key in self.props:
                return self.props[key]
        return None

    def get(self, prop: ConfigProperty[T]) -> T | None:
        for key in prop.keys():
            if key in self.props:
                return prop.parse(self.props[key], key)
        return prop.default

    def get_or(self, prop: ConfigProperty[T], fallback: T) -> T:
        value = self.get(prop)
        return fallback if value is None else value

    def with_values(self, values: Mapping[str, Any]) -> "HoodieConfig":
        return HoodieConfig.of(self.props, values)

    def subset(self, prefixes: str | tuple[str, ...]) -> "HoodieConfig":
        """The options whose keys start with one of `prefixes` (a family of keys, e.g. the key generator's)."""
        return HoodieConfig({k: v for k, v in self.props.items() if k.startswith(prefixes)})

    def items(self) -> Iterable[tuple[str, str]]:
        return self.props.items()


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class HiveSyncConfigKeys:
    """Apache Hudi's Hive sync options (`HiveSyncConfigHolder` / `HoodieSyncConfig`), used by catalog/.

    Deviations: ENABLE has no fixed default here (on when a metastore is in use, see catalog.hive_sync);
    SUPPORT_TIMESTAMP defaults to true, as Hudi's Spark SQL writer sets it."""

    PREFIXES = ("hoodie.datasource.hive_sync.", "hoodie.datasource.meta.sync.", "hoodie.datasource.meta_sync.")
    ENABLE = _prop("hoodie.datasource.hive_sync.enable", None, parse_bool, "hoodie.datasource.meta.sync.enable")
    MODE = _prop("hoodie.datasource.hive_sync.mode", "hms", str)
    METASTORE_URIS = _prop("hoodie.datasource.hive_sync.metastore.uris", None, str)
    DATABASE = _prop("hoodie.datasource.hive_sync.database", None, str)
    TABLE = _prop("hoodie.datasource.hive_sync.table", None, str)
    BASE_FILE_FORMAT = _ignored("hoodie.datasource.hive_sync.base_file_format", "PARQUET", str,
                                "tables are registered with the parquet input format, the only base file format")
    PARTITION_FIELDS = _prop("hoodie.datasource.hive_sync.partition_fields", None, parse_list)
    PARTITION_EXTRACTOR_CLASS = _prop("hoodie.datasource.hive_sync.partition_extractor_class", None, str)
    SKIP_RO_SUFFIX = _prop("hoodie.datasource.hive_sync.skip_ro_suffix", False, parse_bool)
    AUTO_CREATE_DATABASE = _prop("hoodie.datasource.hive_sync.auto_create_database", True, parse_bool)
    SYNC_AS_DATASOURCE = _prop("hoodie.datasource.hive_sync.sync_as_datasource", True, parse_bool)
    SCHEMA_STRING_LENGTH_THRESHOLD = _prop("hoodie.datasource.hive_sync.schema_string_length_thresh", 4000, int)
    SUPPORT_TIMESTAMP = _prop("hoodie.datasource.hive_sync.support_timestamp", True, parse_bool)
    CREATE_MANAGED_TABLE = _prop("hoodie.datasource.hive_sync.create_managed_table", False, parse_bool)
    TABLE_PROPERTIES = _prop("hoodie.datasource.hive_sync.table_properties", None, str)
    SERDE_PROPERTIES = _prop("hoodie.datasource.hive_sync.serde_properties", None, str)
    OMIT_METADATA_FIELDS = _prop("hoodie.datasource.hive_sync.omit_metadata_fields", False, parse_bool)
    CONDITIONAL_SYNC = _prop("hoodie.datasource.meta_sync.condition.sync", False, parse_bool)
    SPARK_VERSION = _prop("hoodie.meta_sync.spark.version", None, str)
    RELOCATE_TABLE = _prop(
        "sqlext.catalog.relocate.table", False, parse_bool,
        doc="this engine's (not Hudi's), a write option: true lets this write's Hive sync re-register a catalog "
            "table registered at another location at the written path. Without it such a write fails before "
            "writing anything, naming the table and both locations: a sync would silently re-point every query "
            "of that name to another table")


class CompactionConfigKeys:
    """Apache Hudi's compaction options (`HoodieCompactionConfig`), used by storage/table_service/compaction.py."""

    INLINE_COMPACT = _prop("hoodie.compact.inline", False, parse_bool)
    SCHEDULE_INLINE_COMPACT = _prop("hoodie.compact.schedule.inline", False, parse_bool)
    ASYNC_COMPACT = _prop(
        "hoodie.datasource.compaction.async.enable", False, parse_bool,
        doc="with hoodie.compact.inline=false: the writer schedules a compaction when the inline trigger fires and "
            "executes it in a background thread while later writes go on (Hudi's default true acts only in "
            "streaming writers; here a batch writer opts in)")
    INLINE_TRIGGER_STRATEGY = _prop("hoodie.compact.inline.trigger.strategy", "NUM_COMMITS", str)
    INLINE_MAX_DELTA_COMMITS = _prop("hoodie.compact.inline.max.delta.commits", 5, int)
    INLINE_MAX_DELTA_SECONDS = _prop("hoodie.compact.inline.max.delta.seconds", 3600, int)
    STRATEGY = _prop("hoodie.compaction.strategy",
                     "org.apache.hudi.table.action.compact.strategy.LogFileSizeBasedCompactionStrategy", str)
    TARGET_IO = _prop("hoodie.compaction.target.io", 512000, int)  # MB, as Hudi
    LOGFILE_SIZE_THRESHOLD = _prop("hoodie.compaction.logfile.size.threshold", 0, int)


class ClusteringConfigKeys:
    """Apache Hudi's clustering options (`HoodieClusteringConfig`), used by storage/table_service/clustering/."""

    _P = "hoodie.clustering.plan.strategy."
    INLINE = _prop("hoodie.clustering.inline", False, parse_bool,
                   doc="schedule and execute a clustering after every hoodie.clustering.inline.max.commits commits")
    INLINE_MAX_COMMITS = _prop("hoodie.clustering.inline.max.commits", 4, int)
    SCHEDULE_INLINE = _prop("hoodie.clustering.schedule.inline", False, parse_bool,
                            doc="only schedule a clustering inline (executed by CALL run_clustering or async)")
    ASYNC_ENABLED = _prop("hoodie.clustering.async.enabled", False, parse_bool,
                          doc="schedule inline, execute in a background thread of the writing process")
    ASYNC_MAX_COMMITS = _prop("hoodie.clustering.async.max.commits", 4, int)
    PLAN_STRATEGY_CLASS = _prop("hoodie.clustering.plan.strategy.class",
                                "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy",
                                str, doc="size-based planning (the only strategy here)")
    EXECUTION_STRATEGY_CLASS = _prop(
        "hoodie.clustering.execution.strategy.class",
        "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy", str,
        doc="sort by the sort columns (hoodie.layout.optimize.strategy) and write files of the target size")
    SMALL_FILE_LIMIT = _prop(_P + "small.file.limit", 314572800, int,
                             doc="file slices smaller than this (bytes: base file + log files) are clustered")
    MAX_BYTES_PER_GROUP = _prop(_P + "max.bytes.per.group", 2147483648, int,
                                doc="a clustering group holds at most this many input bytes (one Spark task each)")
    MAX_NUM_GROUPS = _prop(_P + "max.num.groups", 30, int)
    TARGET_FILE_MAX_BYTES = _prop(_P + "target.file.max.bytes", 1073741824, int)
    SKIP_PARTITIONS_FROM_LATEST = _prop(_P + "skip.partitions.from.latest", 0, int)
    DAYBASED_LOOKBACK_PARTITIONS = _prop(_P + "daybased.lookback.partitions", 2, int)
    BEGIN_PARTITION = _prop(_P + "cluster.begin.partition", None, str)
    END_PARTITION = _prop(_P + "cluster.end.partition", None, str)
    PARTITION_REGEX_PATTERN = _prop(_P + "partition.regex.pattern", None, str)
    PARTITION_SELECTED = _prop(_P + "partition.selected", None, parse_list,
                               doc="comma-separated partition paths to cluster (the procedure's predicate ends here)")
    SORT_COLUMNS = _prop(_P + "sort.columns", None, parse_list)
    SINGLE_GROUP_CLUSTERING = _prop(_P + "single.group.clustering.enabled", True, parse_bool,
                                    doc="false: a group of a single file slice is left out of the plan")
    PARTITION_FILTER_MODE = _prop("hoodie.clustering.plan.partition.filter.mode", "NONE",
                                  OneOf(("NONE", "RECENT_DAYS", "SELECTED_PARTITIONS", "DAY_ROLLING")))
    UPDATES_STRATEGY = _prop(
        "hoodie.clustering.updates.strategy",
        "org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy", str,
        doc="SparkRejectUpdateStrategy: a write updating a file group under pending clustering fails; "
            "SparkAllowUpdateStrategy: the update wins and the clustering aborts at its commit")
    PRESERVE_COMMIT_METADATA = _prop("hoodie.clustering.preserve.commit.metadata", True, parse_bool,
                                     doc="records keep their _hoodie_commit_time / _hoodie_commit_seqno")
    LAYOUT_OPTIMIZE_STRATEGY = _prop("hoodie.layout.optimize.strategy", "linear", str,
                                     doc="linear | z-order | hilbert: how rows are ordered by the sort columns")
    LAYOUT_CURVE_BUILD_METHOD = _prop("hoodie.layout.optimize.curve.build.method", "direct",
                                      lambda v: OneOf(("DIRECT", "SAMPLE"))(v).lower(),
                                      doc="direct (values mapped to 64 bits); sample is accepted and runs direct")


class WriteCommitCallbackConfigKeys:
    """Apache Hudi's commit callback options (`HoodieWriteCommitCallbackConfig`,
    `HoodieWriteCommitKafkaCallbackConfig`), used by storage/callback/.

    Defaults are Hudi's code (the HTTP timeout is 30 s there, though its doc string says 3).
    HTTP_RETRIES is this project's: Hudi's HTTP callback posts once."""

    _P = "hoodie.write.commit.callback."
    TURN_CALLBACK_ON = _prop(_P + "on", False, parse_bool)
    CALLBACK_CLASS_NAME = _prop(_P + "class", "org.apache.hudi.callback.impl.HoodieWriteCommitHttpCallback", str)
    HTTP_URL = _prop(_P + "http.url", None, str)
    HTTP_API_KEY = _prop(_P + "http.api.key", "hudi_write_commit_http_callback", str)
    HTTP_TIMEOUT_SECONDS = _prop(_P + "http.timeout.seconds", 30, int)
    HTTP_CUSTOM_HEADERS = _prop(_P + "http.custom.headers", None, str,
                                doc="extra request headers: 'Name1:value1;Name2:value2'")
    HTTP_RETRIES = _prop(_P + "http.retries", 3, int,
                         doc="re-sends after a connection error, a timeout or a 5xx answer (not Hudi's)")
    KAFKA_BOOTSTRAP_SERVERS = _prop(_P + "kafka.bootstrap.servers", None, str)
    KAFKA_TOPIC = _prop(_P + "kafka.topic", None, str)
    KAFKA_PARTITION = _prop(_P + "kafka.partition", None, int)
    KAFKA_ACKS = _prop(_P + "kafka.acks", "all", str)
    KAFKA_RETRIES = _prop(_P + "kafka.retries", 3, int)


class CleanConfigKeys:
    """Apache Hudi's cleaner options (`HoodieCleanConfig`), used by storage/table_service/clean*.py."""

    AUTO_CLEAN = _prop("hoodie.clean.automatic", True, parse_bool)
    ASYNC_CLEAN = _prop("hoodie.clean.async", False, parse_bool)
    POLICY = _prop("hoodie.cleaner.policy", "KEEP_LATEST_COMMITS", str,
                   doc="KEEP_LATEST_COMMITS | KEEP_LATEST_FILE_VERSIONS | KEEP_LATEST_BY_HOURS: which file versions "
                       "a clean keeps")
    COMMITS_RETAINED = _prop("hoodie.cleaner.commits.retained", 10, int)
    FILE_VERSIONS_RETAINED = _prop("hoodie.cleaner.fileversions.retained", 3, int)
    HOURS_RETAINED = _prop("hoodie.cleaner.hours.retained", 24, int)
    INCREMENTAL_MODE = _prop("hoodie.cleaner.incremental.mode", True, parse_bool)
    TRIGGER_STRATEGY = _prop("hoodie.clean.trigger.strategy", "NUM_COMMITS", str)
    MAX_COMMITS = _prop("hoodie.clean.max.commits", 1, int)
    PARALLELISM = _prop("hoodie.cleaner.parallelism", 200, int)
    ALLOW_MULTIPLE = _ignored("hoodie.clean.allow.multiple", True, parse_bool,
                              "a pending clean is finished before another is planned")
    EMPTY_CLEAN_CREATE_DURATION_MS = _prop(
        "hoodie.write.empty.clean.create.duration.ms", -1, int,
        doc="with nothing to clean, still publish an empty clean (advancing earliestCommitToRetain) when the last "
            "clean is older than this; -1: only when archival waits on the last clean's earliestCommitToRetain")


class ArchivalConfigKeys:
    """Apache Hudi's archival options (`HoodieArchivalConfig`, defaults of Hudi 0.14: min 20 / max 30 instants;
    145 / 150 in older releases), used by storage/table_service/archival.py."""

    AUTO_ARCHIVE = _prop("hoodie.archive.automatic", True, parse_bool)
    ASYNC_ARCHIVE = _prop("hoodie.archive.async", False, parse_bool)
    MIN_COMMITS_TO_KEEP = _prop("hoodie.keep.min.commits", 20, int)
    MAX_COMMITS_TO_KEEP = _prop("hoodie.keep.max.commits", 30, int)
    COMMITS_ARCHIVAL_BATCH_SIZE = _prop("hoodie.commits.archival.batch", 10, int)
    ARCHIVE_BEYOND_SAVEPOINT = _prop("hoodie.archive.beyond.savepoint", False, parse_bool)
    MERGE_ENABLE = _prop("hoodie.archive.merge.enable", False, parse_bool)
    MERGE_SMALL_FILE_LIMIT_BYTES = _prop("hoodie.archive.merge.small.file.limit.bytes", 20 * 1024 * 1024, int)
    MERGE_FILES_BATCH_SIZE = _prop("hoodie.archive.merge.files.batch.size", 10, int)
    TIMELINE_COMPACTION_BATCH_SIZE = _prop(
        "hoodie.timeline.compaction.batch.size", 10, int,
        doc="table version 8+: once a layer of the LSM archived timeline holds this many files, its oldest ones are "
            "merged into one file of the next layer (storage/timeline/lsm_timeline_writer.py)")


class LogFileConfigKeys:
    """Merge-on-read log file options (`HoodieStorageConfig`), used by storage/file_group/log_format.py."""

    DATA_BLOCK_MAX_SIZE = _prop(
        "hoodie.logfile.data.block.max.size", 256 * 1024 * 1024, int,
        doc="Largest data block content in bytes; a larger avro data block is split into several blocks.")
    DATA_BLOCK_FORMAT = _prop(
        "hoodie.logfile.data.block.format", "avro", str,
        doc="Format of the data blocks a merge-on-read write appends: avro (AVRO_DATA_BLOCK) or parquet "
            "(PARQUET_DATA_BLOCK, encoded by Arrow: much cheaper to write for wide batches).")
    LOG_FILE_MAX_SIZE = _prop(
        "hoodie.logfile.max.size", 1024 * 1024 * 1024, int,
        doc="Size in bytes at which the writer of a file slice rolls over to the next log file version.")


class MetadataConfigKeys:
    """Apache Hudi's metadata-table options (`HoodieMetadataConfig`), used by storage/metadata/metadata_writer.py:
    whether a writer keeps the table's metadata table (`.hoodie/metadata`) in step, and which of its partitions;
    and by readers: whether the file-system view lists files through it (storage/table/fs_view.py)."""

    ENABLE = _prop("hoodie.metadata.enable", True, parse_bool,
                   doc="writers keep the metadata table (files, column_stats, partition_stats - the last not on "
                       "table version 6) in step with every action; false removes an existing one before the "
                       "write, as Hudi does for a writer with it disabled (Hudi's default, true). On a read: "
                       "whether to list the table's files through its metadata table (READER_ENABLE)")
    READER_ENABLE = _prop("hoodie.metadata.enable", True, parse_bool,
                          doc="readers (and the file listings of writers and table services, whose MDT is kept in "
                              "step or removed first) list the table's files through its metadata table's files "
                              "partition when the table has one (Hudi's reader default: true); false on a read "
                              "lists the partition directories")
    COLUMN_STATS_ENABLE = _prop("hoodie.metadata.index.column.stats.enable", False, parse_bool,
                                doc="keep the column_stats partition: min/max/null counts of every data file's "
                                    "columns, from parquet footers (base files) and log records (log files)")
    COLUMN_STATS_COLUMNS = _prop("hoodie.metadata.index.column.stats.column.list", None, parse_list,
                                 doc="the columns column_stats indexes (unset: every top-level column but "
                                     "_hoodie_commit_seqno and _hoodie_file_name, up to max.columns.to.index); a "
                                     "name that is not an indexable top-level column is warned about and not "
                                     "indexed (its filters skip no file)")
    COLUMN_STATS_MAX_COLUMNS = _prop("hoodie.metadata.index.column.stats.max.columns.to.index", 32, int)
    COLUMN_STATS_FILE_GROUP_COUNT = _prop("hoodie.metadata.index.column.stats.file.group.count", 2, int,
                                          doc="file groups of the column_stats partition when it is created")
    PARTITION_STATS_ENABLE = _prop("hoodie.metadata.index.partition.stats.enable", False, parse_bool,
                                   doc="keep the partition_stats partition (needs column_stats; partitioned "
                                       "tables only): per partition and column, the stats of its latest slices")
    PARTITION_STATS_FILE_GROUP_COUNT = _prop("hoodie.metadata.index.partition.stats.file.group.count", 1, int)
    BLOOM_FILTER_ENABLE = _prop("hoodie.metadata.index.bloom.filter.enable", False, parse_bool,
                                doc="keep the bloom_filters partition: each base file's record-key bloom filter, "
                                    "from its footer, for the BLOOM index (hoodie.bloom.index.use.metadata)")
    BLOOM_FILTER_FILE_GROUP_COUNT = _prop("hoodie.metadata.index.bloom.filter.file.group.count", 4, int,
                                          doc="file groups of the bloom_filters partition when it is created")
    RECORD_INDEX_ENABLE = _prop("hoodie.metadata.record.index.enable", False, parse_bool,
                                doc="keep the record_index partition (record key -> partition and file group), "
                                    "built from the table when it is enabled and kept by every write and service; "
                                    "a table that has one keeps it whatever this option says")
    RECORD_INDEX_MIN_FILE_GROUPS = _prop("hoodie.metadata.record.index.min.filegroup.count", 10, int,
                                         doc="fewest file groups (shards) of record_index when it is built")
    RECORD_INDEX_MAX_FILE_GROUPS = _prop("hoodie.metadata.record.index.max.filegroup.count", 10000, int,
                                         doc="most file groups (shards) of record_index when it is built")
    RECORD_INDEX_MAX_FILE_GROUP_SIZE = _prop("hoodie.metadata.record.index.max.filegroup.size", 1024 ** 3, int,
                                             doc="bytes a record_index file group is sized for (48 per record)")
    RECORD_INDEX_GROWTH_FACTOR = _prop("hoodie.metadata.record.index.growth.factor", 2.0, float,
                                       doc="expected growth of the record count the shard count is sized for")
    COMPACT_MAX_DELTA_COMMITS = _prop("hoodie.metadata.compact.max.delta.commits", 10, int,
                                      doc="the metadata table is compacted (new HFile base files) after this many "
                                          "deltacommits since its last compaction")


class MemoryConfigKeys:
    """Apache Hudi's memory options (`HoodieMemoryConfig`, the disk map of `HoodieCommonConfig`): how much of a
    log merge (MOR snapshot read, compaction) is held in memory before it spills to local disk."""

    MERGE_FRACTION = _prop("hoodie.memory.merge.fraction", 0.6, float,
                           doc="share of the task's memory a merge may hold when hoodie.memory.merge.max.size is "
                               "unset by the user")
    COMPACTION_FRACTION = _prop("hoodie.memory.compaction.fraction", 0.6, float,
                                doc="share of the task's memory a compaction may hold when "
                                    "hoodie.memory.compaction.max.size is unset by the user")
    COMPACTION_MAX_SIZE = _prop("hoodie.memory.compaction.max.size", None, int,
                                doc="bytes of log records a compaction or snapshot read holds in memory per file slice "
                                    "before spilling to hoodie.memory.spillable.map.path (unset: from the fraction)")
    SPILLABLE_MAP_PATH = _prop("hoodie.memory.spillable.map.path", "/tmp/", str,
                               doc="local directory the spillable map writes its spill files to")
    DISK_MAP_TYPE = _prop("hoodie.common.spillable.diskmap.type", "BITCASK", OneOf(("BITCASK", "ROCKS_DB")),
                          doc="the spilled part's on-disk form (both are served by this engine's Arrow spill files)")
    DISK_MAP_COMPRESSION = _prop("hoodie.common.diskmap.compression.enabled", True, parse_bool)


class EngineConfigKeys:
    """This engine's own choice of where a write's or a table service's work runs (storage.engine.engine_context,
    storage.write.local): Spark, or this process (pyarrow and a thread pool: Hudi's local engine context) for work
    small enough to cost less than a Spark job."""

    ENGINE = _prop("hoodie.sqlext.engine", "AUTO", OneOf(("AUTO", "SPARK", "LOCAL")),
                   doc="AUTO: writes whose input, and compaction or clustering plans whose files, are at most "
                       "hoodie.sqlext.engine.local.max.bytes, and cleans of at most "
                       "hoodie.sqlext.engine.local.max.files files, run in process (writes only those it supports: "
                       "storage.write.local.choice), larger ones on Spark; SPARK or LOCAL: always there (a LOCAL "
                       "write it cannot run, or of a larger input, is refused)")
    LOCAL_MAX_BYTES = _prop("hoodie.sqlext.engine.local.max.bytes", 64 * 1024 * 1024, int,
                            doc="the bytes of a write's input (held in this process), or of the files a compaction "
                                "or clustering plan reads, up to which AUTO runs it in process")
    LOCAL_MAX_FILES = _prop("hoodie.sqlext.engine.local.max.files", 1000, int,
                            doc="the files a clean deletes up to which AUTO deletes them from this process (a "
                                "thread pool) instead of in Spark tasks")


class SparkSqlConfigKeys:
    """Options of Hudi's Spark SQL layer (`DataSourceWriteOptions`, `HoodieSparkSqlWriter`), read by sqlext/ and
    catalog/; declared here so the registry knows them."""

    INSERT_INTO_OPERATION = _prop("hoodie.spark.sql.insert.into.operation", "upsert", str,
                                  doc="the operation of INSERT INTO: upsert, insert or bulk_insert")
    INSERT_DUP_POLICY = _prop("hoodie.datasource.insert.dup.policy", "none", str,
                              doc="INSERT INTO with operation insert / bulk_insert: none | drop | fail on keys the "
                                  "table has")
    OVERWRITE_MODE = _prop("hoodie.datasource.overwrite.mode", None, str,
                           doc="INSERT OVERWRITE: STATIC (the whole table or the PARTITION clause) or DYNAMIC (the "
                               "partitions written); unset: spark.sql.sources.partitionOverwriteMode")
    QUERY_AS_RO_TABLE = _prop("hoodie.query.as.ro.table", False, parse_bool,
                              doc="serde property of a synced table: read it read-optimized (the _ro table)")
    SQL_MANAGED = _prop("hoodie.sql.managed", False, parse_bool,
                        doc="this engine's table property: the table lives in its managed location (DROP deletes "
                            "the data)")
    RECORD_MERGER_IMPLS = _ignored("hoodie.datasource.write.record.merger.impls", None, parse_list,
                                   "records merge with the table's payload / merge mode semantics",
                                   "hoodie.write.record.merger.impls", "hoodie.record.merger.impls")


KEY_CLASSES: tuple[type, ...] = (
    TableConfigKeys, WriteConfigKeys, LockConfigKeys, ReadConfigKeys, TimestampKeyGeneratorKeys, HiveSyncConfigKeys,
    CompactionConfigKeys, ClusteringConfigKeys, WriteCommitCallbackConfigKeys, CleanConfigKeys, ArchivalConfigKeys, LogFileConfigKeys,
    MetadataConfigKeys, MemoryConfigKeys, EngineConfigKeys, SparkSqlConfigKeys)


class ConfigRegistry:
    """Every `ConfigProperty` of the key classes, by key and alternative. A key declared by two classes (a
    table property that is also a write option) is one entry: honoured when any declaration is."""

    def __init__(self, classes: Iterable[type]):
        self._by_key: dict[str, list[ConfigProperty]] = {}
        self._group: dict[str, str] = {}  # primary key -> the first line of its class's doc
        for cls in classes:
            group = (cls.__doc__ or cls.__name__).strip().splitlines()[0]
            for value in vars(cls).values():
                if isinstance(value, ConfigProperty):
                    self._group.setdefault(value.key, group)
                    for key in value.keys():
                        self._by_key.setdefault(key, []).append(value)

    def group(self, key: str) -> str:
        """Where the key belongs (its key class's doc), for listings."""
        return self._group.get(key, "")

    def lookup(self, key: str) -> ConfigProperty | None:
        """The property `key` names (primary declarations first), None when unknown."""
        props = self._by_key.get(key)
        if not props:
            return None
        return next((p for p in props if p.key == key), props[0])

    def honoured(self, key: str) -> bool:
        return any(p.honoured for p in self._by_key.get(key, ()))

    def declarations(self, key: str) -> list[ConfigProperty]:
        return list(self._by_key.get(key, ()))

    def properties(self) -> list[ConfigProperty]:
        """One property per primary key, sorted by key."""
        primary = {}
        for props in self._by_key.values():
            for p in props:
                primary.setdefault(p.key, p)
        return [primary[k] for k in sorted(primary)]

    def suggest(self, key: str) -> str | None:
        """The known key closest to `key` (a typo's intended key), if any is close."""
        return closest(key, self._by_key, cutoff=0.8)


REGISTRY = ConfigRegistry(KEY_CLASSES)

# The options that fix how a table is keyed and laid out when its first write creates it. A misspelt one is not
# an option without effect but a table without it for good (unpartitioned, no ordering field, another key
# generator or table type), so a near miss of one of these is an error, never only a warning.
KEY_OPTIONS: tuple[ConfigProperty, ...] = (
    WriteConfigKeys.RECORDKEY_FIELD, WriteConfigKeys.PRECOMBINE_FIELD, WriteConfigKeys.PARTITIONPATH_FIELD,
    WriteConfigKeys.KEYGENERATOR_CLASS, WriteConfigKeys.KEYGENERATOR_TYPE, WriteConfigKeys.TABLE_TYPE,
    TableConfigKeys.TYPE, TableConfigKeys.RECORDKEY_FIELDS, TableConfigKeys.PRECOMBINE_FIELD,
    TableConfigKeys.PARTITION_FIELDS, TableConfigKeys.KEYGEN_CLASS, TableConfigKeys.KEYGEN_TYPE)

# Hudi's Spark SQL names of table properties (HoodieOptionConfig's sqlKeyName; any case in TBLPROPERTIES /
# OPTIONS) and the option each stands for (`type` takes cow / mor)
SQL_OPTION_NAMES: dict[str, ConfigProperty] = {
    "primaryKey": WriteConfigKeys.RECORDKEY_FIELD,
    "recordKey": WriteConfigKeys.RECORDKEY_FIELD,
    "preCombineField": WriteConfigKeys.PRECOMBINE_FIELD,
    "orderingFields": WriteConfigKeys.PRECOMBINE_FIELD,
    "type": WriteConfigKeys.TABLE_TYPE,
    "payloadClass": WriteConfigKeys.PAYLOAD_CLASS,
}
_SQL_NAMES = {name.lower() for name in SQL_OPTION_NAMES}

# difflib ratio of a near miss: a letter or two off in a dotted key scores 0.97+, a dropped `.field` 0.92; real
# Hudi keys this engine does not know stay below it (hoodie.datasource.write.partitions.to.delete: 0.83 from
# hoodie.datasource.write.partitionpath.field, hoodie.datasource.write.payload.type: 0.89 from ...table.type)
NEAR_MISS_RATIO = 0.9

KEY_PREFIX = "hoodie."  # every key of Hudi's own options and table properties starts with it


def closest(key: str, names: Iterable[str], cutoff: float) -> str | None:
    """The name of `names` closest to `key` in any case, when its difflib ratio is at least `cutoff`."""
    lowered = {n.lower(): n for n in names}
    match = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=cutoff)
    return lowered[match[0]] if match else None


def _one_edit_apart(a: str, b: str) -> bool:
    """`a` is `b` with one letter added, dropped or changed, or two neighbours swapped: the typos of a short name,
    which difflib's ratio undervalues (`tpye` is 0.75 from `type`)."""
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and (a[diff[0]], a[diff[1]]) == (b[diff[1]], b[diff[0]])
        return len(diff) == 1 or swapped
    shorter, longer = sorted((a, b), key=len)
    return len(longer) - len(shorter) == 1 and any(longer[:i] + longer[i + 1:] == shorter for i in range(len(longer)))


def is_known_key(key: str, table_properties: bool = False) -> bool:
    """A key of the registry, or (in TBLPROPERTIES, `table_properties`) one of Hudi's SQL names in any case."""
    return REGISTRY.lookup(key) is not None or (table_properties and key.lower() in _SQL_NAMES)


def misspelt_key_option(key: str, table_properties: bool = False) -> str | None:
    """The key option (`KEY_OPTIONS`) that `key`, no known key itself, misspells: the same key in another case,
    one edit away from it, or a close difflib match (`NEAR_MISS_RATIO`). In TBLPROPERTIES (`table_properties`)
    Hudi's SQL names of key options (primaryKey, preCombineField, orderingFields, type) count too."""
    if is_known_key(key, table_properties):
        return None
    names = [k for p in KEY_OPTIONS for k in p.keys()]
    if table_properties:
        names += [name for name, prop in SQL_OPTION_NAMES.items() if prop in KEY_OPTIONS]
    lowered = key.lower()
    one_edit = next((n for n in names if lowered == n.lower() or _one_edit_apart(lowered, n.lower())), None)
    return one_edit or closest(key, names, NEAR_MISS_RATIO)


def validate_options(options: Mapping[str, Any] | None, context: str,
                     stored: Mapping[str, Any] | None = None, strict: bool | None = None, *,
                     table_properties: bool = False) -> list[str]:
    """Check the options a write or read (`context`, e.g. "write to /t") is given before it does anything:

    - a near miss of a key option (`misspelt_key_option`) is an error naming the key meant, always: the table
      would be created without the option, which no later write can repair;
    - every known key's value is parsed (an error naming the key);
    - an unknown key (naming the closest known key, if any is close) or a key known but not honoured warns
      (logger `storage.config`) every time it is given, or with `hoodie.strict.config=true` fails.

    Checked are the `hoodie.*` keys, or with `table_properties` (SQL TBLPROPERTIES / OPTIONS) every key, Hudi's
    SQL names (primaryKey, ...) being known ones. Keys whose value equals the table's own property (`stored`:
    hoodie.properties merged into the options by the caller) are the table's, not the user's, and are not
    checked. `strict` overrides the options' own hoodie.strict.config. Returns the problems warned about."""
    config = HoodieConfig.of(options)
    strict = config.get(WriteConfigKeys.STRICT_CONFIG) if strict is None else strict
    stored = {str(k): _to_text(v) for k, v in (stored or {}).items()}
    given = [(key, value) for key, value in sorted(config.items())
             if stored.get(key) != value and (table_properties or key.lower().startswith(KEY_PREFIX))]
    misspelt = [_misspelt(key, meant) for key, _ in given if (meant := misspelt_key_option(key, table_properties))]
    if misspelt:
        raise HoodieConfigError(f"{context}: " + "; ".join(misspelt))
    problems = [problem for key, value in given if (problem := _problem(key, value, table_properties))]
    if problems and strict:
        raise HoodieConfigError(f"{context}: " + "; ".join(problems) + f" ({WriteConfigKeys.STRICT_CONFIG.key}=true)")
    for problem in problems:
        log.warning("%s: %s", context, problem)
    return problems


def _misspelt(key: str, meant: str) -> str:
    return (f"unknown {_kind(key)} {key}: did you mean {meant}? A misspelt key option is an error, not a "
            f"warning: the table would be written without {meant}")


def _kind(key: str) -> str:
    return "option" if key.lower().startswith(KEY_PREFIX) else "table property"


def _problem(key: str, value: str, table_properties: bool) -> str | None:
    """Why the given option `key`, no misspelt key option, has no effect here (None: it has one); a value its
    parser rejects raises, naming the key."""
    if table_properties and key.lower() in _SQL_NAMES:
        return None  # the SQL layer reads these itself
    prop = REGISTRY.lookup(key)
    if prop is None:
        hint = REGISTRY.suggest(key) or (closest(key, SQL_OPTION_NAMES, 0.8) if table_properties else None)
        did_you_mean = f" (did you mean {hint}?)" if hint else ""
        return f"unknown {_kind(key)} {key}{did_you_mean}"
    for declared in REGISTRY.declarations(key):
        declared.parse(value, key)
    if not REGISTRY.honoured(key):
        return f"option {key} has no effect in this engine ({prop.doc or 'not honoured'})"
    return None
