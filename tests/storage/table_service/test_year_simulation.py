"""A year of daily upserts, scaled down: COW and MOR tables with inline compaction, auto clean and auto archival
and a savepoint along the way. Afterwards the active timeline is bounded, the archived timeline holds the rest
(in order, as CALL show_archived_commits lists it), the disk holds exactly the versions the policy keeps, the
snapshot equals the expected state and hudi-rs, time travel to retained instants and the savepoint answers, and
restoring the savepoint gives its rows back."""
from __future__ import annotations

import pytest

from service_helpers import expected, options, ours, theirs, versions_per_group, write_commits
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.restore import restore_to_savepoint
from storage.table_service.savepoint import create_savepoint
from storage.timeline.archived_timeline import HoodieArchivedTimeline, list_archive_files

DAYS, SAVEPOINT_DAY = 14, 3
SERVICES = {"hoodie.cleaner.commits.retained": 2, "hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 5,
            "hoodie.commits.archival.batch": 1, "hoodie.compact.inline": "true",
            "hoodie.compact.inline.max.delta.commits": 3}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_year_of_daily_upserts(spark, tmp_path, table_type):
    path = tmp_path / table_type.lower()
    opts = options("y", table_type, **SERVICES)
    state = write_commits(spark, path, opts, range(SAVEPOINT_DAY + 1))
    meta = HoodieTableMetaClient.load(str(path))
    savepoint = meta.timeline.completed().write_timeline().last().timestamp
    at_savepoint = expected(state)
    create_savepoint(str(path), savepoint)
    state = write_commits(spark, path, opts, range(SAVEPOINT_DAY + 1, DAYS), state)

    meta = HoodieTableMetaClient.load(str(path))
    active = [i.timestamp for i in meta.timeline.completed().write_timeline()]
    archived = HoodieArchivedTimeline(meta)
    archived_commits = [i.timestamp for i in archived.completed().write_timeline()]
    # archival stops at the savepoint (hoodie.archive.beyond.savepoint=false): everything before it is archived
    assert archived_commits and max(archived_commits) < savepoint <= min(active)
    assert archived_commits == sorted(archived_commits) and not set(archived_commits) & set(active)
    assert list_archive_files(meta)[0].name == ".commits_.archive.1_1-0-1"
    listed = spark.sql(f"CALL show_archived_commits(path => '{path}', limit => 100)").collect()
    assert [r.commit_time for r in listed] == sorted(archived_commits, reverse=True)
    shown = spark.sql(f"CALL show_commits(table => '{path}', limit => 100, show_archived => true)").collect()
    assert {r.commit_time for r in shown} == set(archived_commits) | set(active)

    # disk: per file group the versions of the 2 retained commits, the one before them and the savepointed one
    versions = versions_per_group(path).values()
    assert max(versions) <= 4 and (table_type != "COPY_ON_WRITE" or set(versions) == {4})
    assert ours(spark, path) == expected(state) == theirs(path)
    for ts in active[-2:] + [savepoint]:
        assert ours(spark, path, **{"as.of.instant": ts}) == theirs(path, as_of=ts)
    assert ours(spark, path, **{"as.of.instant": savepoint}) == at_savepoint

    restore_to_savepoint(str(path), savepoint)
    assert ours(spark, path) == at_savepoint == theirs(path)
