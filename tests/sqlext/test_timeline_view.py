"""CALL show_timeline and `sqlext timeline TABLE --png`: one row per instant (pending ones too), and a picture."""
from __future__ import annotations

import io
import struct

from sqlext import cli
from storage.table.meta_client import HoodieTableMetaClient


def _mor_table(spark, path: str) -> list[str]:
    opts = {"hoodie.table.name": "tl", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    frame = "id INT, ts BIGINT, dt STRING"
    spark.createDataFrame([(1, 1, "a"), (2, 1, "b"), (3, 1, "b")], frame).write.format("hudi").options(**opts) \
        .mode("append").save(path)
    spark.createDataFrame([(2, 2, "b")], frame).write.format("hudi").options(**opts).mode("append").save(path)
    meta = HoodieTableMetaClient.load(path)
    done = [i.timestamp for i in meta.timeline]
    meta.active_timeline.create_requested("deltacommit", meta.active_timeline.new_instant_time())  # a pending write
    return done


def test_show_timeline_rows(spark, tmp_path):
    path = str(tmp_path / "tl")
    done = _mor_table(spark, path)
    rows = spark.sql(f"CALL show_timeline(table => 'hudi.`{path}`')").collect()
    assert [r.state for r in rows] == ["REQUESTED", "COMPLETED", "COMPLETED"]  # newest first
    assert [r.instant_time for r in rows[1:]] == sorted(done, reverse=True)
    assert {r.action for r in rows} == {"deltacommit"}
    first, second = rows[2], rows[1]
    assert (first.files_touched, first.partitions_touched, first.records_written) == (2, 2, 3)
    assert (second.files_touched, second.partitions_touched, second.records_written) == (1, 1, 1)
    assert first.completion_time >= first.instant_time and rows[0].completion_time is None
    limited = spark.sql(f"CALL show_timeline(table => 'hudi.`{path}`', limit => 1)").collect()
    assert [r.state for r in limited] == ["REQUESTED"]


def test_cli_timeline_png(spark, tmp_path):
    path = str(tmp_path / "tl")
    done = _mor_table(spark, path)
    out, png = io.StringIO(), tmp_path / "timeline.png"
    args = cli.build_parser().parse_args(["timeline", path, "--png", str(png)])
    assert cli.timeline(args, out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["instant_time", "action", "state"]
    assert [line.split()[0] for line in lines[2:4]] == sorted(done, reverse=True)
    assert lines[-1] == f"wrote {png}"
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 800 and height > 300


def test_cli_timeline_unknown_table(tmp_path):
    assert cli.main(["timeline", str(tmp_path / "nothing")]) == 2  # a path: no Spark session started
