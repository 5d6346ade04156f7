"""The benchmark suite end to end on tiny sizes, in this test session's SparkSession: every workload x engine
cell has positive numbers, and ours, delta-rs and hudi-rs (reading our table) agree with the Arrow-computed
table after W2 (row count, sum of f1, rows found by the point lookup)."""
from __future__ import annotations

import json
import math

from bench.__main__ import parse
from bench.runner import BenchConfig, run

WORKLOADS = ["W1", "W2", "W5", "W5L"]
ENGINES = ["ours_df", "deltalake", "floor", "hudi_rs"]
WRITERS = ["ours_df/cow", "ours_df/mor", "deltalake", "floor/cow", "floor/mor"]
READERS = ["hudi_rs/cow", "hudi_rs/mor", "floor/cow"]


def test_cli_parses_the_documented_flags():
    cfg = parse(["--rows", "10", "--batch", "4", "--only", "W2,W5", "--runs", "2", "--engines", "ours_df,deltalake"])
    assert (cfg.rows, cfg.batch, cfg.runs, cfg.only, cfg.engines) == (10, 4, 2, ["W2", "W5"], ["ours_df", "deltalake"])


def test_bench_smoke(spark, tmp_path, capsys):
    cfg = BenchConfig(rows=1000, batch=100, runs=1, only=WORKLOADS, engines=ENGINES, workdir=str(tmp_path / "work"),
                      results_dir=str(tmp_path / "results"), warmup=False)
    doc = run(cfg, spark)
    with open(doc["json_path"]) as f:
        saved = json.load(f)
    assert doc["png_path"] and (tmp_path / "results").joinpath(doc["png_path"].split("/")[-1]).stat().st_size > 0
    cells = saved["cells"]
    expected_cells = {(w, e) for w in ("W1", "W2") for e in WRITERS} | {(w, e) for w in ("W5", "W5L")
                                                                        for e in WRITERS[:3] + READERS}
    got = {(w, e) for w, row in cells.items() for e in row}
    assert got == expected_cells
    for w, e in expected_cells:
        cell = cells[w][e]
        assert not cell["errors"], (w, e, cell["errors"])
        assert cell["median_s"] > 0 and cell["py_peak_mb"] > 0, (w, e)
        if w in ("W1", "W2"):
            assert cell["files_written"] > 0 and cell["bytes_written"] > 0, (w, e)
    assert cells["W2"]["ours_df/cow"]["jvm_peak_mb"] > 0
    # correctness cross-check after W2: ours (both types), delta-rs, hudi-rs on our tables, and the Arrow oracle
    want = saved["expected_after_w2"]
    assert want["count"] == 1000 + 50
    for e in ("ours_df/cow", "ours_df/mor", "deltalake", "hudi_rs/cow", "hudi_rs/mor", "floor/cow"):
        got_scan = cells["W5"][e]["results"][0]
        assert got_scan["count"] == want["count"], e
        assert math.isclose(got_scan["total"], want["sum"], rel_tol=1e-9), e
        assert cells["W5L"][e]["results"][0]["count"] == 100, e
    # ratios: ours against each peer and the floor, in the printed table too
    assert set(saved["ratios"]["W2"]["ours_df/cow"]) == {"deltalake", "floor"}
    assert all(v > 0 for v in saved["ratios"]["W2"]["ours_df/cow"].values())
    assert set(saved["ratios"]["W5"]["ours_df/cow"]) == {"deltalake", "hudi_rs", "floor(pyarrow)"}
    assert set(saved["ratios"]["W5"]["ours_df/mor"]) == {"deltalake", "hudi_rs"}  # no pyarrow merge of logs
    assert "ours_df/cow" in capsys.readouterr().out


def test_w8_smoke(spark, tmp_path):
    """W8 tiny: a bulk insert and 3 small upserts (4 files) clustered into one; both queries find the rows the
    data has (checked inside the run) and read no more files after than before; deltalake alongside."""
    from bench import w8

    cfg, out_dir = w8.parse(["--rows", "300", "--upserts", "3", "--batch", "50", "--runs", "1",
                             "--out", str(tmp_path / "results")])
    assert (cfg.rows, cfg.upserts, cfg.batch, cfg.strategy, cfg.types) == (300, 3, 50, "z-order", ("cow",))
    doc = w8.run(cfg, spark, str(tmp_path / "w8"))
    from bench.measure import save_result

    with open(save_result(doc, out_dir, "w8")) as f:
        saved = json.load(f)
    ours, delta = saved["results"]
    assert (ours["engine"], delta["engine"]) == ("ours/cow", "deltalake")
    for r in (ours, delta):
        assert r["optimize_seconds"] > 0
        for q in ("range", "point"):
            before, after = r["before"][q], r["after"][q]
            assert before["files_total"] == 4 and after["files_total"] == 1, (r["engine"], q)
            assert before["rows"] == after["rows"] and after["files_read"] <= before["files_read"]
    assert ours["after"]["range"]["spark_files"] == 1
    assert any("ours/cow" in line for line in w8.table_lines(saved))


def test_w9_smoke(spark, tmp_path):
    """W9 tiny: a 10-file clustered table with the metadata table; each query keeps one file slice of ten and
    finds the rows the data has with skipping on and off (checked inside the run); deltalake alongside."""
    from bench import w9

    cfg, _ = w9.parse(["--rows", "2000", "--files", "10", "--types", "cow", "--runs", "1"])
    doc = w9.run(cfg, spark, str(tmp_path / "w9"))
    ours, delta = doc["results"]
    assert (ours["engine"], delta["engine"]) == ("ours/cow", "deltalake")
    for name in ("needle", "lookup100"):
        cell = ours["queries"][name]
        assert (cell["slices_kept"], cell["slices_total"]) == (1, 10), name
        assert delta["queries"][name]["files_read"] == 1
    assert set(doc["summary"]) == {"ours/cow/needle", "ours/cow/lookup100"}
