"""Compaction scheduling on Java-written MOR tables (copied, fixtures are read-only)."""
import shutil

import pytest

from storage.avro.container import read_avro_container
from storage.config import HoodieConfig
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.compaction import HoodieCompactionError, schedule_compaction, show_compaction
from tests.hudi_oracle import hudi_rs_read


@pytest.fixture
def mor_copy(fixture_table, tmp_path):
    dst = tmp_path / "t"
    shutil.copytree(fixture_table("trips_mor_avro_v6_trips_8i1u"), dst)
    return str(dst)


UNBOUNDED = HoodieConfig.of({
    "hoodie.compaction.strategy": "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy"})


def _sorted_rows(table):
    return sorted(map(str, table.to_pylist()))


def test_schedule_writes_avro_plan_of_slices_with_logs(mor_copy):
    before = _sorted_rows(hudi_rs_read(mor_copy))
    instant = schedule_compaction(mor_copy, UNBOUNDED)
    assert instant is not None
    mc = HoodieTableMetaClient.load(mor_copy)
    files = [p for i, p in mc.active_timeline.all_files().items() if i.timestamp == instant]
    assert len(files) == 1 and files[0].endswith(f"{instant}.compaction.requested")
    plan = read_avro_container(open(files[0], "rb").read())
    ops = plan["operations"]
    assert ops and all(op["deltaFilePaths"] for op in ops)
    assert all(".log." in name for op in ops for name in op["deltaFilePaths"])
    shown = show_compaction(mor_copy)
    assert [(s["instant"], s["state"], s["operation_size"]) for s in shown] == [(instant, "REQUESTED", len(ops))]
    # a second schedule excludes the file groups already in the pending plan
    assert schedule_compaction(mor_copy) is None
    # a requested compaction changes nothing for readers
    assert _sorted_rows(hudi_rs_read(mor_copy)) == before


def test_schedule_rejects_cow(fixture_table, tmp_path):
    dst = tmp_path / "c"
    shutil.copytree(fixture_table("sample_cow_v6_nonpartitioned"), dst)
    with pytest.raises(HoodieCompactionError, match="MERGE_ON_READ"):
        schedule_compaction(str(dst))


def test_inline_trigger_strategies(mor_copy):
    from storage.table_service.compaction import _delta_commits_since_last_compaction, should_schedule_inline
    from storage.timeline.instant_time import parse_instant

    mc = HoodieTableMetaClient.load(mor_copy)
    count, start = _delta_commits_since_last_compaction(mc)
    deltas = [i for i in mc.timeline.completed() if i.action == "deltacommit"]
    assert count == len(deltas) > 0
    t0 = parse_instant(start).timestamp()

    def trig(strategy, commits, seconds, now):
        return should_schedule_inline(mc, HoodieConfig.of({"hoodie.compact.inline.trigger.strategy": strategy,
                                                           "hoodie.compact.inline.max.delta.commits": str(commits),
                                                           "hoodie.compact.inline.max.delta.seconds": str(seconds)}),
                                      now=now)

    assert trig("NUM_COMMITS", count, 10**9, t0)
    assert not trig("NUM_COMMITS", count + 1, 0, t0 + 10**6)
    assert trig("TIME_ELAPSED", 10**6, 60, t0 + 61)
    assert not trig("TIME_ELAPSED", 0, 60, t0 + 59)
    assert not trig("NUM_AND_TIME", count, 60, t0 + 59)
    assert trig("NUM_AND_TIME", count, 60, t0 + 61)
    assert trig("NUM_OR_TIME", count + 1, 60, t0 + 61)
    assert not trig("NUM_OR_TIME", count + 1, 60, t0 + 59)
    with pytest.raises(HoodieCompactionError, match="trigger.strategy"):
        trig("SOMETIMES", 1, 1, t0)
    # once a compaction is scheduled, counting restarts after it
    assert schedule_compaction(mor_copy, UNBOUNDED)
    assert _delta_commits_since_last_compaction(HoodieTableMetaClient.load(mor_copy))[0] == 0
