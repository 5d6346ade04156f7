"""`hoodie.bulkinsert.sort.mode` (Hudi's BulkInsertSortMode) and the `hoodie.*.shuffle.parallelism` knobs.

A bulk insert's file layout: with NONE records keep the input's order and a partition's new files each get a
uniform hash share of its keys; GLOBAL_SORT gives each new file of a partition a contiguous range of record keys
(its records ranked by key, the file's share a range of ranks) and sorts it, so file key ranges never overlap
and range pruning of the bloom index works; PARTITION_SORT sorts each file by record key (ranges may overlap);
PARTITION_PATH_REPARTITION keeps each partition's records together, which every file here already does (a file
never mixes partitions), so it writes as NONE.

The shuffle parallelism of an operation sets the tasks of its dedup shuffle (or, for a bulk insert that does
not combine, the repartition of its input); 0 leaves them to Spark, as Hudi leaves them to the input.
"""
from __future__ import annotations

from enum import Enum

from pyspark.sql import Column, Window
from pyspark.sql import functions as F

from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.write.operation import WriteOperationType


class BulkInsertSortMode(str, Enum):
    NONE = "NONE"
    GLOBAL_SORT = "GLOBAL_SORT"
    PARTITION_SORT = "PARTITION_SORT"
    PARTITION_PATH_REPARTITION = "PARTITION_PATH_REPARTITION"

    @property
    def sorts_files(self) -> bool:
        return self in (BulkInsertSortMode.GLOBAL_SORT, BulkInsertSortMode.PARTITION_SORT)


def sort_mode(config: HoodieConfig, op: WriteOperationType) -> BulkInsertSortMode:
    """The sort mode of `op`: only bulk inserts sort."""
    if op is not WriteOperationType.BULK_INSERT:
        return BulkInsertSortMode.NONE
    return BulkInsertSortMode(config.get(WK.BULKINSERT_SORT_MODE))


def key_rank_position() -> Column:
    """Each record's position in [0, 1] among its partition's records ordered by record key (GLOBAL_SORT): the
    insert shares of a partition's new files then cut it into contiguous key ranges."""
    return F.percent_rank().over(Window.partitionBy(PARTITION_PATH).orderBy(RECORD_KEY))


_PARALLELISM = {
    WriteOperationType.UPSERT: WK.UPSERT_SHUFFLE_PARALLELISM,
    WriteOperationType.INSERT: WK.INSERT_SHUFFLE_PARALLELISM,
    WriteOperationType.BULK_INSERT: WK.BULKINSERT_SHUFFLE_PARALLELISM,
    WriteOperationType.DELETE: WK.DELETE_SHUFFLE_PARALLELISM,
}


def shuffle_parallelism(config: HoodieConfig, op: WriteOperationType) -> int:
    """`hoodie.<op>.shuffle.parallelism` of `op` (overwrites shuffle as inserts do); 0 = Spark decides."""
    prop = _PARALLELISM.get(op, WK.INSERT_SHUFFLE_PARALLELISM)
    return max(0, int(config.get(prop) or 0))
