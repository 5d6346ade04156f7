"""`python -m bench.floors` on tiny sizes in this test session's SparkSession: each probe hands Python the rows it
claims to (the whole load, the whole batch in its groups) and every figure is a positive time."""
from __future__ import annotations

from bench.engines.ours import SparkInput
from bench.floors import measure, probes
from bench.workloads import DataSet


def test_probes_move_the_data_they_claim(spark, tmp_path):
    data = DataSet(1000, 100)
    inputs = SparkInput(spark, str(tmp_path))
    try:
        run = probes(spark, inputs, data)
        assert sum(r.n for r in run["transfer_load"]()) == 1000  # every load row reached a Python task
        groups = run["shuffle_batch"]()
        assert sum(r.n for r in groups) == data.uniform_batch().num_rows and 1 < len(groups) <= 30
        assert sum(r.n for r in run["python_stage"]()) == spark.sparkContext.defaultParallelism
        assert sum(r["count"] for r in run["spark_job"]()) == 50
    finally:
        inputs.release()


def test_measure_reports_every_probe_and_deltalake(spark, tmp_path):
    results = measure(spark, DataSet(1000, 100), str(tmp_path), runs=1)
    assert set(results) == {"spark_job", "python_stage", "jvm_stage", "transfer_load", "shuffle_batch", "scan_load",
                            "deltalake_W1", "deltalake_W2"}
    assert all(seconds > 0 for seconds in results.values())
