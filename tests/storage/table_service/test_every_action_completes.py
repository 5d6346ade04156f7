"""Every action that changes a table completes through storage.table.action_completion.complete_action: writes
(commit, deltacommit), inline compaction and clustering, clean, savepoint, the rollbacks of a restore and the
restore, a schema change and a truncation. A recording hook sees each one inflight before and completed after."""
from __future__ import annotations

import pyarrow as pa
import pytest

from service_helpers import batch, options, write
from storage.config import HoodieConfig
from storage.table.action_completion import register_post_complete, register_pre_complete
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action


@pytest.fixture
def hooks():
    """Hooks recording what they see; unregistered afterwards (the registry is process-wide)."""
    seen: list[tuple] = []

    def state(c) -> str:
        found = c.meta.active_timeline.reload().timeline.find(c.instant_time)
        return found.state.value if found is not None else "gone"

    undo = [register_pre_complete(lambda c: seen.append(("pre", c.action, c.operation, state(c)))),
            register_post_complete(lambda c, done: seen.append(("post", c.action, c.operation, state(c))))]
    yield seen
    for u in undo:
        u()


def test_every_action_completes_through_it(spark, tmp_path, hooks):
    from storage.table_service.clean import run_clean
    from storage.table_service.restore import restore_to_savepoint
    from storage.table_service.savepoint import create_savepoint
    from storage.write.table_commits import commit_delete_partitions, commit_schema_change

    cow, mor = tmp_path / "cow", tmp_path / "mor"
    cow_opts = options("cow", **{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": 2,
                                 "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                 "hoodie.cleaner.fileversions.retained": 1, "hoodie.clean.automatic": "false"})
    mor_opts = options("mor", "MERGE_ON_READ", **{"hoodie.compact.inline": "true",
                                                   "hoodie.compact.inline.max.delta.commits": 2})
    for n in range(2):
        write(spark, cow, batch(n), cow_opts)   # the second one clusters inline
        write(spark, mor, batch(n), mor_opts)   # the second one compacts inline
    write(spark, cow, batch(2), cow_opts)  # a second version of the clustered files
    assert run_clean(spark, str(cow), HoodieConfig.of(cow_opts)) is not None
    meta = HoodieTableMetaClient.load(str(cow))
    kept = meta.timeline.completed().write_timeline().last().timestamp
    create_savepoint(meta, kept)
    write(spark, cow, batch(5), cow_opts)
    restore_to_savepoint(str(cow), kept, spark)  # rolls back what came after, then completes the restore
    meta = HoodieTableMetaClient.load(str(cow))
    commit_schema_change(meta, pa.schema([("id", pa.int32()), ("name", pa.string()), ("ts", pa.int64()),
                                          ("dt", pa.string()), ("extra", pa.string())]))
    assert commit_delete_partitions(meta, None) is not None
    pre = {(action, operation) for step, action, operation, state in hooks if step == "pre" and state == "INFLIGHT"}
    post = {(action, operation) for step, action, operation, state in hooks if step == "post" and state == "COMPLETED"}
    assert pre == post
    assert {a for a, _ in pre} == {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
                                   Action.CLEAN, Action.SAVEPOINT, Action.ROLLBACK, Action.RESTORE}
    assert {o for _, o in pre} == {"UPSERT", "COMPACT", "CLUSTER", "clean", "savepoint", "rollback", "restore",
                                   "ALTER_SCHEMA", "DELETE_PARTITION"}
