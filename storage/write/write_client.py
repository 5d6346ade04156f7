"""HoodieWriteClient: one write (insert, upsert, bulk_insert, delete, insert_overwrite[_table]) from a
Spark DataFrame to a table, as a two-phase commit.

Phase 1 runs in Spark: keys and partition paths (native expressions), dedup by precombine value, index
lookup (a join), then one task per bucket writes one file in Arrow and returns its write stat.
Phase 2 runs on the driver: the stats become the commit metadata of the completed instant. Nothing is
visible to readers before that file exists, and a failure before it leaves the table as it was.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from storage.config import HoodieConfig, TableConfigKeys as TK, WriteConfigKeys as WK
from storage.avro.schema_converter import arrow_to_avro_schema
from storage.file_group.log_format import DATA_BLOCK_FORMAT, DATA_BLOCK_MAX_SIZE
from storage.index import create_index
from storage.index.simple_index import LOC_FILE_ID, LOC_PARTITION
from storage.meta_fields import IS_DELETED, PARTITION_PATH, RECORD_KEY, with_meta_columns
from storage.io.base_file_writer import bloom_options_of
from storage.io.storage import normalize_base_path
from storage.keygen import KeyGenerator, create_key_generator
from storage.keygen.key_generator import HoodieKeyError
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.table.table_config import KEYGEN_CLASS_BY_TYPE, HoodieTableConfig
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat
from storage.timeline.instant import Action
from storage.write.handle import (
    BUCKET_COLUMN,
    OP_COLUMN,
    OP_DELETE,
    OP_WRITE,
    PAYLOAD_DEFAULT,
    PAYLOAD_OVERWRITE_LATEST,
    BucketTarget,
    LogTarget,
    WriteTaskContext,
    serialize_schema,
    write_bucket_udf,
)
from storage.write.commit_callback import CommitEvent, fire_commit_callbacks
from storage.write.heartbeat import Heartbeat
from storage.write.operation import WriteOperationType
from storage.write.partitioner import (
    BucketPlan,
    BucketType,
    SizingConfig,
    SmallFile,
    WorkloadProfile,
    average_record_size,
    plan_buckets,
    plan_new_file_groups,
)
from storage.write.rollback import abort_write, rollback_failed_writes
from storage.write.schema import data_schema, reconcile
from storage.write.spark_partitioning import placement_keys
from storage.exception import HoodieDuplicateKeyError, HoodieWriteError

log = logging.getLogger(__name__)

UNIFORM = "_hoodie_u"
_INPUT_ORDER = "_hoodie_input_order"
_KEY_COUNT = "_hoodie_key_count"
_DELETE_COPY, _MOVED = "_hoodie_delete_copy", "_hoodie_moved"
_CRASH_HOOK = "HUDI_TEST_CRASH_BEFORE_COMMIT"  # tests: die like a killed writer after data files exist


_BROADCAST_MAX_RECORDS = 1_000_000  # incoming keys broadcast to the index lookup up to this batch size


@dataclass
class TableSettings:
    """What a write needs to know about the table, from hoodie.properties or (new table) the options."""

    name: str
    table_type: str
    record_keys: list[str]
    partition_fields: list[str]
    precombine: str | None
    keygen: KeyGenerator
    populate_meta_fields: bool
    database: str


def _resolve_settings(config: HoodieConfig, table: HoodieTableConfig | None) -> TableSettings:
    if table is not None:
        record_keys = table.record_key_fields or config.get(WK.RECORDKEY_FIELD) or []
        partitions = table.partition_fields
        precombine = table.precombine_field
        keygen_class = table.keygen_class
        hive_style, url_encode = table.hive_style_partitioning, table.url_encode_partitioning
        _check_consistent(config, "record key", WK.RECORDKEY_FIELD, record_keys)
        name, table_type, populate = table.name, table.table_type, table.populate_meta_fields
        database = table.database_name or "default"
    else:
        name = config.get(WK.TABLE_NAME)
        if not name:
            raise HoodieWriteError("missing table name: set hoodie.table.name")
        record_keys = config.get(WK.RECORDKEY_FIELD) or []
        partitions = config.get(WK.PARTITIONPATH_FIELD) or []
        precombine = config.get(WK.PRECOMBINE_FIELD)
        keygen_class = config.get(WK.KEYGENERATOR_CLASS) or config.get(WK.KEYGENERATOR_TYPE)
        hive_style = config.get(WK.HIVE_STYLE_PARTITIONING)
        url_encode = config.get(WK.URL_ENCODE_PARTITIONING)
        table_type = _table_type(config.get(WK.TABLE_TYPE))
        populate = config.get(WK.POPULATE_META_FIELDS)
        database = config.get(WK.DATABASE_NAME)
    if not record_keys:
        raise HoodieWriteError("missing record key: set hoodie.datasource.write.recordkey.field")
    keygen = create_key_generator(config, record_keys, partitions, keygen_class, hive_style, url_encode)
    return TableSettings(name, table_type, record_keys, partitions, precombine, keygen, populate, database)


def _table_type(value: str) -> str:
    text = str(value).upper()
    if text in ("COPY_ON_WRITE", "COW"):
        return "COPY_ON_WRITE"
    if text in ("MERGE_ON_READ", "MOR"):
        return "MERGE_ON_READ"
    raise HoodieWriteError(f"unknown table type {value!r} (hoodie.datasource.write.table.type)")


def _check_consistent(config: HoodieConfig, what: str, prop, table_value: list[str]) -> None:
    given = config.get(prop)
    if given and [g.lower() for g in given] != [t.lower() for t in table_value]:
        raise HoodieWriteError(f"{what} fields {given} do not match the table's {table_value} ({prop.key})")


def _new_table_config(settings: TableSettings, config: HoodieConfig, avro_schema: str) -> HoodieTableConfig:
    props = {
        TK.NAME.key: settings.name,
        TK.TYPE.key: settings.table_type,
        TK.VERSION.key: "6",
        TK.TIMELINE_LAYOUT_VERSION.key: "1",
        TK.ARCHIVELOG_FOLDER.key: "archived",
        TK.RECORDKEY_FIELDS.key: ",".join(settings.record_keys),
        TK.KEYGEN_CLASS.key: KEYGEN_CLASS_BY_TYPE[settings.keygen.keygen_type],
        TK.HIVE_STYLE_PARTITIONING.key: str(settings.keygen.hive_style).lower(),
        TK.URL_ENCODE_PARTITIONING.key: str(settings.keygen.url_encode).lower(),
        TK.DROP_PARTITION_COLUMNS.key: "false",
        TK.DATABASE_NAME.key: settings.database,
        TK.CREATE_SCHEMA.key: avro_schema,
        TK.PAYLOAD_CLASS.key: config.get(WK.PAYLOAD_CLASS) or TK.PAYLOAD_CLASS.default,
    }
    if settings.partition_fields:
        props[TK.PARTITION_FIELDS.key] = ",".join(settings.partition_fields)
    if settings.precombine:
        props[TK.PRECOMBINE_FIELD.key] = settings.precombine
    if not settings.populate_meta_fields:
        props[TK.POPULATE_META_FIELDS.key] = "false"
    for key, value in config.items():
        if key.startswith("hoodie.keygen.timebased."):
            props[key] = value
    return HoodieTableConfig(props)


def new_table_config(options: dict[str, str], data_schema: pa.Schema) -> HoodieTableConfig:
    """The hoodie.properties a first write with `options` and `data_schema` would create."""
    config = HoodieConfig.of(options)
    # the schema a write would record (byte/short -> int, UTC timestamps)
    return _table_config_for(_resolve_settings(config, None), config, reconcile(None, data_schema))


def _table_config_for(settings: TableSettings, config: HoodieConfig, schema: pa.Schema) -> HoodieTableConfig:
    from storage.avro.schema_converter import arrow_to_create_schema

    avro = json.dumps(arrow_to_create_schema(schema, settings.name), separators=(",", ":"))
    return _new_table_config(settings, config, avro)


def init_table(base_path: str, options: dict[str, str], data_schema: pa.Schema,
               extra_props: dict[str, str] | None = None) -> HoodieTableMetaClient:
    """Create an empty table (`.hoodie/` with hoodie.properties, no commit) from write options and a schema
    (what CREATE TABLE does before any row is written)."""
    config = new_table_config(options, data_schema)
    if extra_props:
        config = config.with_updates({k: v for k, v in extra_props.items() if k not in config.props})
    return HoodieTableMetaClient.init_table(base_path, config)


def _data_block_format(value: str) -> str:
    fmt = str(value).strip().lower()
    if fmt not in ("avro", "parquet"):
        raise HoodieWriteError(f"unsupported hoodie.logfile.data.block.format {value!r}: use avro or parquet")
    return fmt


def _payload_name(config: HoodieConfig, table: HoodieTableConfig | None) -> str:
    cls = config.get(WK.PAYLOAD_CLASS) or (table.props.get(TK.PAYLOAD_CLASS.key) if table else None) or ""
    if cls.rsplit(".", 1)[-1] == PAYLOAD_DEFAULT or (table and table.get(TK.RECORD_MERGE_MODE) == "EVENT_TIME_ORDERING"):
        return PAYLOAD_DEFAULT
    return PAYLOAD_OVERWRITE_LATEST


class HoodieWriteClient:
    def __init__(self, spark: SparkSession, base_path: str, options: dict[str, str]):
        self.spark = spark
        self.base_path = normalize_base_path(base_path)
        self.config = HoodieConfig.of(options)
        self.meta_client = HoodieTableMetaClient.load(self.base_path) if HoodieTableMetaClient.exists(self.base_path) else None
        self.callback_failures: list[tuple[str, Exception]] = []
        self.require_unique_keys = False

    # -- entry point -----------------------------------------------------------------------------
    def write(self, df: DataFrame, operation: str | None = None,
              require_unique_keys: bool = False) -> HoodieCommitMetadata | None:
        """`require_unique_keys`: instead of combining records that share a key, reject the batch (raise
        `HoodieDuplicateKeyError` before anything is written); an upsert through a global index also rejects a key
        that is stored in more than one partition. SQL MERGE relies on it to run as a plain upsert."""
        op = WriteOperationType.parse(operation or self.config.get(WK.OPERATION))
        self.require_unique_keys = require_unique_keys
        table_cfg = self.meta_client.table_config if self.meta_client else None
        try:
            settings = _resolve_settings(self.config, table_cfg)
        except HoodieKeyError as exc:
            raise HoodieWriteError(str(exc)) from None
        self.is_mor = settings.table_type == "MERGE_ON_READ"
        self._validate_input(df, settings, op)
        target_schema = self._target_schema(df, settings, op)
        records = self._prepare(df, settings, op, target_schema)
        if op.uses_index or self._combine(op):
            # read by the counts, the index lookup and the write tasks: the dedup and key expressions run once.
            # Bulk inserts and overwrites only count, then write: caching would cost more than a second scan.
            records = records.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            return self._write_prepared(records, settings, op, target_schema)
        finally:
            records.unpersist()

    # -- validation ------------------------------------------------------------------------------
    def _validate_input(self, df: DataFrame, settings: TableSettings, op: WriteOperationType) -> None:
        columns = {c.lower() for c in df.columns}
        for name in settings.keygen.required_fields():
            if name.split(".")[0].lower() not in columns:
                raise HoodieWriteError(f"record key or partition field '{name}' is missing from the data "
                                       f"(columns: {', '.join(df.columns)})")
        if settings.precombine and op is not WriteOperationType.DELETE and settings.precombine.lower() not in columns:
            raise HoodieWriteError(f"precombine field '{settings.precombine}' is missing from the data "
                                   f"(hoodie.datasource.write.precombine.field; columns: {', '.join(df.columns)})")

    def _target_schema(self, df: DataFrame, settings: TableSettings, op: WriteOperationType) -> pa.Schema:
        incoming = to_arrow_schema(df.schema, timezone="UTC")
        table_schema = table_data_schema(self.meta_client) if self.meta_client else None
        if op is WriteOperationType.DELETE and table_schema is not None:
            return data_schema(table_schema)
        return reconcile(table_schema, incoming)

    # -- phase 1: prepare ------------------------------------------------------------------------
    def _prepare(self, df: DataFrame, settings: TableSettings, op: WriteOperationType, schema: pa.Schema) -> DataFrame:
        spark_schema = from_arrow_schema(schema, prefer_timestamp_ntz=False)
        lower = {c.lower(): c for c in df.columns}
        cols = []
        for field in spark_schema.fields:
            src = lower.get(field.name.lower())
            value = F.col(f"`{src}`").cast(field.dataType) if src else F.lit(None).cast(field.dataType)
            cols.append(value.alias(field.name))
        is_delete = F.lit(OP_DELETE if op is WriteOperationType.DELETE else OP_WRITE).cast("tinyint")
        if IS_DELETED.lower() in lower:  # soft-delete marker: a side column, not part of the table schema
            cols.append(F.col(f"`{lower[IS_DELETED.lower()]}`").cast("boolean").alias(IS_DELETED))
        keyed = df.select(
            *cols,
            settings.keygen.record_key().alias(RECORD_KEY),
            settings.keygen.partition_path().alias(PARTITION_PATH),
            is_delete.alias(OP_COLUMN),
        )
        if self._combine(op) or self.require_unique_keys:
            keyed = self._dedup(keyed, settings)
        return keyed

    def _combine(self, op: WriteOperationType) -> bool:
        if op is WriteOperationType.UPSERT:
            return self.config.get(WK.COMBINE_BEFORE_UPSERT)
        if op is WriteOperationType.DELETE:
            return self.config.get(WK.COMBINE_BEFORE_DELETE)
        return self.config.get(WK.COMBINE_BEFORE_INSERT)

    def _dedup(self, keyed: DataFrame, settings: TableSettings) -> DataFrame:
        """Keep one record per key: the highest precombine value, ties to the later input row."""
        is_global = self.config.get(WK.INDEX_TYPE).upper().startswith("GLOBAL") or not settings.partition_fields
        group = [RECORD_KEY] if is_global else [RECORD_KEY, PARTITION_PATH]
        keyed = keyed.withColumn(_INPUT_ORDER, F.monotonically_increasing_id())
        order = [F.col(_INPUT_ORDER)]
        if settings.precombine:
            order.insert(0, F.col(f"`{settings.precombine}`"))
        row = F.struct(*[F.col(f"`{c}`") for c in keyed.columns if c != _INPUT_ORDER])
        aggs = [F.max_by(row, F.struct(*order)).alias("_r")]
        if self.require_unique_keys:  # counted in the same aggregation, checked by the first job over the batch
            aggs.append(F.count(F.lit(1)).alias(_KEY_COUNT))
        return keyed.groupBy(*group).agg(*aggs).select("_r.*", *([_KEY_COUNT] if self.require_unique_keys else []))

    # -- phase 1: tag, profile, bucket, write ----------------------------------------------------
    def _write_prepared(self, records: DataFrame, settings: TableSettings, op: WriteOperationType,
                        schema: pa.Schema) -> HoodieCommitMetadata | None:
        counts = self._partition_counts(records)
        records = records.drop(_KEY_COUNT)
        if self.meta_client is None:
            self.meta_client = self._init_table(settings, schema)
        meta = self.meta_client
        rollback_failed_writes(meta)
        fs_view = FileSystemView(meta)
        partitions = sorted(counts)
        tagged = self._tag(records, settings, op, fs_view, partitions, sum(counts.values()))
        if op.uses_index:  # the index join feeds both the workload profile and the write tasks: computed once
            tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            profile = self._profile(tagged) if op in (WriteOperationType.UPSERT, WriteOperationType.DELETE,
                                                       WriteOperationType.INSERT) else None
            if self.require_unique_keys and op is WriteOperationType.UPSERT and profile.written > sum(counts.values()):
                raise HoodieDuplicateKeyError("a record key of the batch is stored in more than one partition: the index "
                                        "lookup matched it more than once")
            plan = self._plan(op, tagged, profile, fs_view, counts)
            if len(plan) == 0 and not self.config.get(WK.ALLOW_EMPTY_COMMIT):
                log.info("nothing to write to %s and hoodie.allow.empty.commit=false: no commit", self.base_path)
                return None
            return self._execute(tagged, settings, op, schema, plan, fs_view, partitions)
        finally:
            tagged.unpersist()

    def _partition_counts(self, records: DataFrame) -> dict[str, int]:
        """Records per partition path (the first Spark job over the prepared batch); with
        `require_unique_keys` the same job finds the most repeated key."""
        unique = _KEY_COUNT in records.columns
        aggs = [F.count(F.lit(1))]
        if unique:
            aggs += [F.max(_KEY_COUNT), F.max_by(RECORD_KEY, _KEY_COUNT)]
        try:
            rows = records.groupBy(PARTITION_PATH).agg(*aggs).collect()
        except Exception as exc:  # a key expression failed inside Spark: report it plainly
            raise _plain_error(exc) from None
        if unique and rows:
            _, _, most, key = max(rows, key=lambda r: r[2])
            if most > 1:
                raise HoodieDuplicateKeyError(f"record key '{key}' occurs {most} times in the batch", key, most)
        return {r[0]: r[1] for r in rows}

    def _init_table(self, settings: TableSettings, schema: pa.Schema) -> HoodieTableMetaClient:
        return HoodieTableMetaClient.init_table(self.base_path, _table_config_for(settings, self.config, schema))

    def _tag(self, records: DataFrame, settings: TableSettings, op: WriteOperationType, fs_view: FileSystemView,
             partitions: list[str], num_records: int) -> DataFrame:
        if not op.uses_index and op is not WriteOperationType.INSERT:
            return records.withColumn(LOC_FILE_ID, F.lit(None).cast("string")).withColumn(LOC_PARTITION, F.lit(None).cast("string"))
        index = create_index(self.config.get(WK.INDEX_TYPE), self.config.get(WK.SIMPLE_INDEX_UPDATE_PARTITION_PATH))
        if op is WriteOperationType.INSERT:
            # inserts skip the index lookup (as Hudi does); they may still fill small files
            return records.withColumn(LOC_FILE_ID, F.lit(None).cast("string")).withColumn(LOC_PARTITION, F.lit(None).cast("string"))
        base_files = fs_view.latest_base_files(None if index.is_global else partitions)
        if settings.populate_meta_fields:
            def key_columns(df):
                return F.col(RECORD_KEY), F.col(PARTITION_PATH)
            read_schema = StructType([StructField(RECORD_KEY, StringType()), StructField(PARTITION_PATH, StringType())])
        else:  # the stored meta fields are null: keys and partition paths come from the data, as on write
            def key_columns(df):
                return settings.keygen.record_key(), settings.keygen.partition_path()
            read_schema = None
        tagged = index.tag_location(self.spark, records, base_files, key_columns,
                                    broadcast_incoming=self._can_broadcast(num_records), read_schema=read_schema)
        if op is WriteOperationType.DELETE:
            tagged = tagged.where(F.col(LOC_FILE_ID).isNotNull()).withColumn(PARTITION_PATH, F.col(LOC_PARTITION))
        elif index.is_global:
            tagged = self._global_partition_change(tagged, index.update_partition_path)
        return tagged

    def _can_broadcast(self, num_records: int) -> bool:
        """Broadcast the batch's keys to the index lookup when the batch is small (and the session allows
        broadcast joins at all)."""
        threshold = self.spark.conf.get("spark.sql.autoBroadcastJoinThreshold", "10485760")
        return num_records <= _BROADCAST_MAX_RECORDS and str(threshold).strip() != "-1"

    @staticmethod
    def _global_partition_change(tagged: DataFrame, update_partition_path: bool) -> DataFrame:
        moved = F.col(LOC_FILE_ID).isNotNull() & (F.col(LOC_PARTITION) != F.col(PARTITION_PATH))
        if not update_partition_path:
            return tagged.withColumn(PARTITION_PATH, F.when(moved, F.col(LOC_PARTITION)).otherwise(F.col(PARTITION_PATH)))
        # the record moves: delete it from its old file group, insert it into the new partition. Both rows come
        # from one pass (explode), so the index join is not evaluated twice as a union of two filters would be
        copy = F.explode(F.when(moved, F.array(F.lit(False), F.lit(True))).otherwise(F.array(F.lit(False))))
        rows = tagged.withColumn(_MOVED, moved).withColumn(_DELETE_COPY, copy)
        is_delete, moved_insert = F.col(_DELETE_COPY), F.col(_MOVED) & ~F.col(_DELETE_COPY)
        return rows.select(
            *[F.col(f"`{c}`") for c in tagged.columns if c not in (PARTITION_PATH, OP_COLUMN, LOC_FILE_ID, LOC_PARTITION)],
            F.when(is_delete, F.col(LOC_PARTITION)).otherwise(F.col(PARTITION_PATH)).alias(PARTITION_PATH),
            F.when(is_delete, F.lit(OP_DELETE)).otherwise(F.col(OP_COLUMN)).cast("tinyint").alias(OP_COLUMN),
            F.when(moved_insert, F.lit(None)).otherwise(F.col(LOC_FILE_ID)).alias(LOC_FILE_ID),
            F.when(moved_insert, F.lit(None)).otherwise(F.col(LOC_PARTITION)).alias(LOC_PARTITION),
        )

    @staticmethod
    def _profile(tagged: DataFrame) -> WorkloadProfile:
        rows = tagged.groupBy(PARTITION_PATH, LOC_FILE_ID, OP_COLUMN).count().collect()
        profile = WorkloadProfile()
        for partition, file_id, op, count in rows:
            if file_id is None:
                profile.inserts[partition] = profile.inserts.get(partition, 0) + count
            else:
                profile.updates[(partition, file_id)] = profile.updates.get((partition, file_id), 0) + count
            if op == OP_WRITE:
                profile.written += count
        return profile

    def _sizing(self) -> SizingConfig:
        c = self.config
        return SizingConfig(c.get(WK.PARQUET_SMALL_FILE_LIMIT), c.get(WK.PARQUET_MAX_FILE_SIZE),
                            c.get(WK.COPY_ON_WRITE_RECORD_SIZE_ESTIMATE), c.get(WK.COPY_ON_WRITE_INSERT_SPLIT_SIZE),
                            c.get(WK.COPY_ON_WRITE_INSERT_AUTO_SPLIT))

    def _avg_record_size(self, sizing: SizingConfig) -> int:
        totals = []
        timeline = self.meta_client.timeline.completed().of_actions([Action.COMMIT, Action.REPLACE_COMMIT])
        for instant in reversed(timeline.instants[-20:]):
            stats = self.meta_client.active_timeline.commit_metadata(instant).write_stats()
            totals.append((sum(s.totalWriteBytes for s in stats), sum(s.numWrites for s in stats)))
        return average_record_size(totals, sizing, self.config.get(WK.RECORD_SIZE_ESTIMATION_THRESHOLD))

    def _plan(self, op: WriteOperationType, tagged: DataFrame, profile: WorkloadProfile | None,
              fs_view: FileSystemView, counts: dict[str, int]) -> BucketPlan:
        """Buckets of the write; without a workload profile (bulk insert, overwrite) every record is new, so
        the per-partition counts of the input say everything."""
        sizing = self._sizing()
        avg = self._avg_record_size(sizing)
        if profile is None:
            return plan_new_file_groups(counts, sizing, avg)
        small: dict[str, list[SmallFile]] = {}
        if getattr(self, "is_mor", False):
            # MOR inserts go to new file groups: an UPDATE bucket appends to logs, which SIMPLE indexes do not see
            return plan_buckets(profile, small, sizing, avg)
        for bf in fs_view.latest_base_files(sorted(profile.inserts)):
            if bf.size < sizing.small_file_limit:
                partition = _partition_of(self.base_path, bf.path)
                small.setdefault(partition, []).append(SmallFile(partition, bf.file_id, bf.size))
        return plan_buckets(profile, small, sizing, avg)

    def _execute(self, tagged: DataFrame, settings: TableSettings, op: WriteOperationType, schema: pa.Schema,
                 plan: BucketPlan, fs_view: FileSystemView, partitions: list[str]) -> HoodieCommitMetadata:
        meta = self.meta_client
        timeline = meta.active_timeline
        instant_time = timeline.new_instant_time()
        action = op.commit_action
        if getattr(self, "is_mor", False) and action == Action.COMMIT:
            action = Action.DELTA_COMMIT  # merge-on-read writes complete as deltacommits
        requested = timeline.create_requested(action, instant_time, self._requested_content(op))
        heartbeat = Heartbeat(meta.storage, meta.meta_path, instant_time).start()
        try:
            inflight = timeline.transition_to_inflight(requested, self._inflight_content(op, plan))
            ctx = self._task_context(instant_time, schema, plan, fs_view, settings)
            stats = self._run_write_tasks(tagged, plan, ctx)
            metadata = self._commit_metadata(op, stats, schema, settings, fs_view, partitions)
            if os.environ.get(_CRASH_HOOK) == "1":
                os._exit(17)
            timeline.transition_to_complete(inflight, metadata.to_json_bytes())
        except BaseException:
            log.exception("write %s failed; undoing it", instant_time)
            abort_write(meta, instant_time)
            raise
        finally:
            heartbeat.stop()
        from storage.write.markers import delete_marker_dir

        delete_marker_dir(meta.storage, meta.marker_dir(instant_time))
        meta.reload()
        self.callback_failures = fire_commit_callbacks(CommitEvent(
            self.base_path, settings.name, instant_time, action, op.metadata_name, dict(self.config.items())))
        if action == Action.DELTA_COMMIT:
            self._maybe_schedule_compaction()
        return metadata

    def _maybe_schedule_compaction(self) -> None:
        """Inline compaction: when the trigger fires, `hoodie.compact.inline` schedules and executes a compaction
        right after the deltacommit; `hoodie.compact.schedule.inline` only schedules it (an async or later
        `run_compaction` executes it)."""
        from storage.config import CompactionConfigKeys as CK
        from storage.table_service.compaction import run_compaction, schedule_compaction, should_schedule_inline

        inline = self.config.get(CK.INLINE_COMPACT)
        if not (inline or self.config.get(CK.SCHEDULE_INLINE_COMPACT)):
            return
        options = dict(self.config.items())
        if not should_schedule_inline(self.meta_client, options):
            return
        instant = schedule_compaction(self.meta_client, options)
        if inline and instant is not None:
            run_compaction(self.spark, self.base_path, instant, options)
            self.meta_client.reload()

    def _requested_content(self, op: WriteOperationType) -> bytes:
        if op.commit_action != Action.REPLACE_COMMIT:
            return b""
        from storage.avro.container import write_avro_container
        from storage.avro.models import HOODIE_REQUESTED_REPLACE_METADATA

        return write_avro_container(HOODIE_REQUESTED_REPLACE_METADATA, {
            "operationType": op.metadata_name, "clusteringPlan": None, "extraMetadata": {}, "version": 1})

    @staticmethod
    def _inflight_content(op: WriteOperationType, plan: BucketPlan) -> bytes:
        """The workload profile, as Hudi records it in the inflight file (stats without paths)."""
        md = HoodieCommitMetadata(operationType=op.metadata_name)
        for b in plan.buckets:
            md.add_write_stat(HoodieWriteStat(fileId=b.file_id, path=None, prevCommit=None, partitionPath=b.partition_path,
                                              numInserts=b.expected_inserts, numUpdateWrites=b.expected_updates))
        return md.to_json_bytes()

    def _task_context(self, instant_time: str, schema: pa.Schema, plan: BucketPlan, fs_view: FileSystemView,
                      settings: TableSettings) -> WriteTaskContext:
        latest = {(s.partition_path, s.file_id): s for s in fs_view.latest_file_slices()}
        keys = placement_keys(len(plan))
        is_mor = getattr(self, "is_mor", False)
        pending = _pending_compaction_instants(self.meta_client) if is_mor else {}
        targets = {}
        for b in plan.buckets:
            slice_ = latest.get((b.partition_path, b.file_id)) if b.bucket_type is BucketType.UPDATE else None
            base = slice_.base_file if slice_ else None
            log = None
            if is_mor and b.bucket_type is BucketType.UPDATE and slice_ is not None:
                log = _log_target(slice_, pending.get((b.partition_path, b.file_id)))
            targets[b.bucket_id] = BucketTarget(b.bucket_type, b.partition_path, b.file_id,
                                                base.path if base else None, base.instant_time if base else "null",
                                                log)
        c = self.config
        bloom = bloom_options_of(c)
        return WriteTaskContext(
            base_path=self.base_path, instant_time=instant_time, marker_dir=self.meta_client.marker_dir(instant_time),
            schema_ipc=serialize_schema(with_meta_columns(schema)), targets=targets,
            placement={keys[b]: b for b in range(len(plan))},
            payload=_payload_name(c, self.meta_client.table_config), ordering_field=settings.precombine,
            bloom_options=bloom, compression=c.get(WK.PARQUET_COMPRESSION_CODEC),
            row_group_bytes=c.get(WK.PARQUET_BLOCK_SIZE), populate_meta_fields=settings.populate_meta_fields,
            avro_schema_json=json.dumps(arrow_to_avro_schema(with_meta_columns(schema), settings.name),
                                        separators=(",", ":")) if is_mor else None,
            data_block_max_size=int(c.get(DATA_BLOCK_MAX_SIZE)),
            data_block_format=_data_block_format(c.get(DATA_BLOCK_FORMAT)),
            record_key_fields=tuple(settings.record_keys),
            complex_keys=settings.keygen.keygen_type == "COMPLEX",
        )

    def _run_write_tasks(self, tagged: DataFrame, plan: BucketPlan, ctx: WriteTaskContext) -> list[HoodieWriteStat]:
        if len(plan) == 0:
            return []
        keys = {b: k for k, b in ctx.placement.items()}
        assigned = assign_buckets(self.spark, tagged, plan, keys).repartition(len(plan), BUCKET_COLUMN)
        rows = assigned.groupBy(BUCKET_COLUMN).applyInArrow(write_bucket_udf(ctx), "stat string").collect()
        return [HoodieWriteStat.from_dict(json.loads(r[0])) for r in rows]

    def _commit_metadata(self, op: WriteOperationType, stats: list[HoodieWriteStat], schema: pa.Schema,
                         settings: TableSettings, fs_view: FileSystemView, partitions: list[str]) -> HoodieCommitMetadata:
        from storage.avro.schema_converter import arrow_to_avro_schema

        md = HoodieCommitMetadata(operationType=op.metadata_name)
        md.extraMetadata["schema"] = json.dumps(arrow_to_avro_schema(schema, settings.name), separators=(",", ":"))
        for stat in sorted(stats, key=lambda s: (s.partitionPath, s.fileId)):
            md.add_write_stat(stat)
        if op.is_overwrite:
            scope = None if op is WriteOperationType.INSERT_OVERWRITE_TABLE else partitions
            replaced: dict[str, list[str]] = {}
            written = {(s.partitionPath, s.fileId) for s in stats}
            for group in fs_view.file_groups():
                fg = group.file_group_id
                if (scope is None or fg.partition_path in scope) and (fg.partition_path, fg.file_id) not in written:
                    replaced.setdefault(fg.partition_path, []).append(fg.file_id)
            md.partitionToReplaceFileIds = replaced
        return md


def _pending_compaction_instants(meta: HoodieTableMetaClient) -> dict[tuple[str, str], str]:
    """(partition, file id) -> instant of the pending compaction whose plan holds the file group."""
    from storage.table_service.compaction import read_plan

    out = {}
    for inst in meta.timeline.pending().of_actions([Action.COMPACTION]):
        for op in read_plan(meta, inst.timestamp).get("operations") or []:
            out[(op.get("partitionPath") or "", op["fileId"])] = inst.timestamp
    return out


def _log_target(slice_, pending_compaction: str | None) -> LogTarget:
    """Where an append goes: the next log version of the latest slice, or (while a compaction of the group is
    pending) a new slice that starts at the compaction instant, as Hudi's file-system view does."""
    if pending_compaction is not None and pending_compaction > slice_.base_instant:
        return LogTarget(pending_compaction, 1)
    versions = [lf.parsed.version for lf in slice_.log_files]
    return LogTarget(slice_.base_instant, max(versions, default=0) + 1)


def _partition_of(base_path: str, file_path: str) -> str:
    directory = file_path.rsplit("/", 1)[0]
    return "" if directory == base_path else directory[len(base_path) + 1:]


def assign_buckets(spark: SparkSession, tagged: DataFrame, plan: BucketPlan,
                   placement_of_bucket: dict[int, int]) -> DataFrame:
    """`tagged` with each record's bucket placement key, computed in Spark (no Python round trip of the data):
    updates by their file group (a broadcast join with the update buckets), inserts by the record key's uniform
    hash within their partition's insert shares (a broadcast join on partition with the share's range; the last
    share of a partition is open-ended)."""
    u = (F.xxhash64(F.col(RECORD_KEY)).bitwiseAND(F.lit(0x7FFFFFFFFFFFFFFF)) / F.lit(float(2 ** 63)))
    out = tagged
    updates = [(p, f, placement_of_bucket[b]) for (p, f), b in plan.update_bucket_of().items()]
    if updates:
        upd = spark.createDataFrame(updates, f"{PARTITION_PATH} string, {LOC_FILE_ID} string, _upd_bucket int")
        out = out.join(F.broadcast(upd), [PARTITION_PATH, LOC_FILE_ID], "left")
    else:
        out = out.withColumn("_upd_bucket", F.lit(None).cast("int"))
    shares = []
    for partition, ranges in plan.insert_ranges().items():
        his = [hi for _, hi, _ in ranges]
        for i, (_, hi, b) in enumerate(ranges):
            lo = his[i - 1] if i else float("-inf")
            shares.append((partition, float(lo), float("inf") if i == len(ranges) - 1 else float(hi),
                           placement_of_bucket[b]))
    if shares:
        ins = spark.createDataFrame(shares, "_ins_partition string, _lo double, _hi double, _ins_bucket int")
        out = out.withColumn(UNIFORM, u)
        cond = ((F.col(PARTITION_PATH) == F.col("_ins_partition")) & F.col(LOC_FILE_ID).isNull()
                & (F.col(UNIFORM) >= F.col("_lo")) & (F.col(UNIFORM) < F.col("_hi")))
        out = out.join(F.broadcast(ins), cond, "left")
    else:
        out = out.withColumn("_ins_bucket", F.lit(None).cast("int"))
    bucket = F.when(F.col(LOC_FILE_ID).isNotNull(), F.col("_upd_bucket")).otherwise(F.col("_ins_bucket"))
    return (out.withColumn(BUCKET_COLUMN, bucket.cast("int"))
            .drop("_upd_bucket", "_ins_bucket", "_ins_partition", "_lo", "_hi", UNIFORM, LOC_FILE_ID, LOC_PARTITION))


def _plain_error(exc: Exception) -> Exception:
    text = str(exc)
    for marker in ("HoodieKeyError:",):
        if marker in text:
            line = text[text.index(marker):].splitlines()[0]
            return HoodieWriteError(line.rstrip(". "))
    return exc


def write_dataframe(spark: SparkSession, df: DataFrame, base_path: str, options: dict[str, str],
                    mode: str = "append", require_unique_keys: bool = False) -> HoodieCommitMetadata | None:
    """`df.write.format("hudi").options(...).mode(mode).save(base_path)`; `require_unique_keys` as in
    `HoodieWriteClient.write`."""
    mode = (mode or "append").lower()
    exists = HoodieTableMetaClient.exists(base_path)
    if exists and mode in ("error", "errorifexists", "default"):
        raise HoodieWriteError(f"table already exists at {base_path} (save mode {mode})")
    if exists and mode == "ignore":
        return None
    operation = None
    if mode == "overwrite" and exists:
        operation = WriteOperationType.INSERT_OVERWRITE_TABLE.value
    return HoodieWriteClient(spark, base_path, options).write(df, operation, require_unique_keys)
