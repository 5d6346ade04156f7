"""`sqlext.session()` in a new process maps the class data sharing archive of its key into Spark's JVM, and an
archive HotSpot cannot use (here: one of another class path) costs nothing but the speed: the session works and
prints no CDS warning into the output (HotSpot writes them on stdout)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from quick_jvm import quick_jvm_env

from storage.io import class_data_sharing as cds

SCRIPT = """
import sqlext
from storage.io import class_data_sharing as cds
spark = sqlext.session(metastore=False, warehouse=__import__("sys").argv[1],
                       conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
print("ARGS", " ".join(str(a) for a in args))
print("ROWS", spark.sql("SELECT 40 + 2 AS x").collect()[0].x)
print("ARCHIVE", cds.spark_archive_key().archive)
"""


@pytest.mark.skipif(cds.java_binary() is None, reason="no java binary")
def test_session_maps_the_archive_and_survives_an_unusable_one(tmp_path):
    # its JVM on JIT tier 1 only (see quick_jvm; the JVM says so on stderr, not stdout): what it runs is the same
    env = quick_jvm_env({k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"})
    env.update({cds.CACHE_ENV: str(tmp_path / "cache"), cds.ENABLED_ENV: "on", "PYSPARK_PYTHON": sys.executable})
    env.pop(cds.TRAINING_ARCHIVE_ENV, None)
    # the key's archive, made by a JVM of another class path (-version has none): HotSpot refuses it quietly
    probe = subprocess.run([sys.executable, "-c", "from storage.io import class_data_sharing as c; "
                            "print(c.spark_archive_key().archive)"], env=env, capture_output=True, text=True)
    archive = probe.stdout.strip()
    os.makedirs(os.path.dirname(archive))
    subprocess.run([str(cds.java_binary()), f"-XX:ArchiveClassesAtExit={archive}", "-version"], check=True,
                   capture_output=True)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "wh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["ARCHIVE"] == archive
    assert f"-XX:SharedArchiveFile={archive}" in lines["ARGS"] and cds.QUIET in lines["ARGS"]
    assert lines["ROWS"] == "42"
    assert "cds" not in done.stdout.replace(archive, "").replace(cds.QUIET, "")  # no HotSpot warning
    assert not (tmp_path / "cache" / "jvm" / f"{os.path.basename(archive)[:-4]}.training").exists()
