"""Reads of things that are not readable Hudi tables fail with a message naming the problem."""
import pytest


def test_path_that_is_not_a_hudi_table(spark, tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(Exception, match=r"not a Hudi table: .*plain"):
        spark.read.format("hudi").load(str(tmp_path / "plain"))


def test_unknown_query_type(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.createDataFrame([(1, 1, "a")], "id long, ts long, v string").write.format("hudi").options(**{
        "hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts"}).save(path)
    with pytest.raises(Exception, match="unknown query type 'bogus'"):
        spark.read.format("hudi").option("hoodie.datasource.query.type", "bogus").load(path)
    with pytest.raises(Exception, match="incremental query needs hoodie.datasource.read.begin.instanttime"):
        spark.read.format("hudi").option("hoodie.datasource.query.type", "incremental").load(path)
