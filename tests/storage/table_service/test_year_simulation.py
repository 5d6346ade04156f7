"""A year of daily upserts, scaled down: COW and MOR tables with inline compaction, auto clean and auto archival
and a savepoint along the way. Afterwards the active timeline is bounded, the archived timeline holds the rest
(in order, as CALL show_archived_commits lists it), the disk holds exactly the versions the policy keeps, the
snapshot equals the expected state and hudi-rs, time travel to retained instants and the savepoint answers, and
restoring the savepoint gives its rows back."""
from __future__ import annotations

import pytest

from service_helpers import expected, options, ours, theirs, timeline_files, versions_per_group, write_commits
from storage.exception import HoodieRestoreError
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.clean_planner import earliest_retained_commit
from storage.table_service.restore import restore_to_savepoint
from storage.table_service.savepoint import create_savepoint
from storage.timeline.archived_timeline import HoodieArchivedTimeline, list_archive_files

# enough days for rounds of archival and cleaning on both sides of the savepoint (KEEP_MAX 5, 2 retained); more
# days only repeat them, at a Spark write each
DAYS = 12
KEEP_MAX, RETAINED = 5, 2
SERVICES = {"hoodie.cleaner.commits.retained": RETAINED, "hoodie.keep.min.commits": 3,
            "hoodie.keep.max.commits": KEEP_MAX, "hoodie.commits.archival.batch": 1, "hoodie.compact.inline": "true",
            "hoodie.compact.inline.max.delta.commits": 3,
            # the metadata table (on, Hudi's default) compacts as often: the data table's archival waits for it
            "hoodie.metadata.compact.max.delta.commits": 3}


@pytest.mark.parametrize("table_type,savepoint_day,beyond", [
    # archival goes on past an early savepoint, keeping only the savepointed commit
    ("COPY_ON_WRITE", 3, True), ("MERGE_ON_READ", 3, True),
    # Hudi's default: archival stops at the savepoint, so a late one keeps the timeline bounded
    ("MERGE_ON_READ", DAYS - 4, False)])
def test_year_of_daily_upserts(spark, tmp_path, table_type, savepoint_day, beyond):
    path = tmp_path / table_type.lower()
    opts = options("y", table_type, **SERVICES, **{"hoodie.archive.beyond.savepoint": str(beyond).lower()})
    # hudi-rs 0.5 starts the timeline at its first commit even when that is a savepointed one, so it hides the
    # merge-on-read base files of commits archived beyond it (Java Hudi and this engine start at the first
    # commit that is not savepointed); there this engine's reader is compared with the expected state alone
    rs_reads = table_type == "COPY_ON_WRITE" or not beyond
    state = write_commits(spark, path, opts, range(savepoint_day + 1))
    meta = HoodieTableMetaClient.load(str(path))
    savepoint = meta.timeline.completed().write_timeline().last().timestamp
    at_savepoint = expected(state)
    create_savepoint(str(path), savepoint)
    most_active, at = 0, {savepoint: at_savepoint}  # instant -> the rows a time travel to it must read
    for day in range(savepoint_day + 1, DAYS):
        state = write_commits(spark, path, opts, range(day, day + 1), state)
        active_now = list(HoodieTableMetaClient.load(str(path)).timeline.completed().write_timeline())
        most_active = max(most_active, len(active_now))
        at.update({i.timestamp: expected(state) for i in active_now if i.timestamp > max(at)})
    assert most_active <= KEEP_MAX  # after every commit, not only at the end

    meta = HoodieTableMetaClient.load(str(path))
    active = [i.timestamp for i in meta.timeline.completed().write_timeline()]
    archived = HoodieArchivedTimeline(meta)
    archived_commits = [i.timestamp for i in archived.completed().write_timeline()]
    # everything but the savepointed commit and the last few is archived, in order, each instant in one place
    assert savepoint in active and (max(archived_commits) > savepoint) == beyond
    assert archived_commits == sorted(archived_commits) and not set(archived_commits) & set(active)
    assert len(archived_commits) + len(active) >= DAYS
    assert list_archive_files(meta)[0].name == ".commits_.archive.1_1-0-1"
    listed = spark.sql(f"CALL show_archived_commits(path => '{path}', limit => 100)").collect()
    assert [r.commit_time for r in listed] == sorted(archived_commits, reverse=True)
    shown = spark.sql(f"CALL show_commits(table => '{path}', limit => 100, show_archived => true)").collect()
    assert {r.commit_time for r in shown} == set(archived_commits) | set(active)

    # disk: per updated file group the versions of the retained commits, the one before them and the savepointed
    # one (merge-on-read: base files come only from compactions, so fewer)
    versions = versions_per_group(path)
    updated = [n for n in versions.values() if n > 1]
    assert updated and max(versions.values()) <= RETAINED + 2
    assert table_type != "COPY_ON_WRITE" or set(updated) == {RETAINED + 2}
    assert ours(spark, path) == expected(state)
    assert not rs_reads or theirs(path) == expected(state)
    retained = [ts for ts in active if ts >= earliest_retained_commit(meta)]
    assert len(retained) >= RETAINED
    for ts in retained + [savepoint]:
        assert ours(spark, path, **{"as.of.instant": ts}) == at[ts]
        assert not rs_reads or theirs(path, as_of=ts) == at[ts]

    if beyond:  # the commits archived past the savepoint cannot be rolled back: refused, nothing changed
        before = timeline_files(path)
        with pytest.raises(HoodieRestoreError, match="archived beyond it"):
            restore_to_savepoint(str(path), savepoint)
        assert timeline_files(path) == before and ours(spark, path) == expected(state)
        return
    restore_to_savepoint(str(path), savepoint)
    assert ours(spark, path) == at_savepoint == theirs(path)
