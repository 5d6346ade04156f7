"""A writer process that dies after its data files exist and before its commit, like a killed Spark job."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from quick_jvm import quick_jvm_env

from storage.testing.crash_points import CRASH_EXIT_CODE, crash_env


def write_and_crash_before_commit(path, rows: list[tuple], schema: str, opts: dict[str, str], cwd) -> None:
    """Append `rows` to the Hudi table at `path` in a separate process that is killed before its commit."""
    script = textwrap.dedent(f"""
        import sqlext
        spark = sqlext.session(master="local[1]", conf={{"spark.ui.enabled": "false"}})
        df = spark.createDataFrame({rows!r}, {schema!r})
        df.write.format("hudi").options(**{opts!r}).mode("append").save({str(path)!r})
    """)
    env = quick_jvm_env(**crash_env("write.before_commit"))  # its JVM on JIT tier 1 only: see quick_jvm
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(cwd), capture_output=True, timeout=300)
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr.decode()[-2000:]
