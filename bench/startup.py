"""Start-up latency of tiny work (issue 47 item 8): a CLI call and the first write of a new Python session.

    python -m bench.startup [--runs 3] [--tree DIR] [--cases cli_cold,cli_warm,...]

Each case runs as a new process (what a user's CLI call or script is) and is timed from outside, wall clock:
- `cli_cold`: `sqlext sql "SELECT 1"` with no metastore running for the warehouse (it starts one);
- `cli_warm`: the same with the warehouse's metastore running (the second call of a session of work);
- `cli_none`: the same with `--metastore none`;
- `first_write`: a script: `sqlext.session()`, CREATE TABLE ... USING hudi, INSERT of 3 rows, metastore running;
- `cli_server`: `sqlext sql "SELECT 1"` while a `sqlext serve` of the warehouse runs (reused by the CLI).
Each case runs with class data sharing on and off (`SQLEXT_CLASS_DATA_SHARING`). `--tree DIR`: run another
checkout's code (a `git worktree` of an older commit) for the before figures. Results: a JSON line per case
and a table on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIRST_WRITE = """
import sqlext
spark = sqlext.session()
spark.sql("CREATE TABLE IF NOT EXISTS tiny (id INT, name STRING, ts BIGINT) USING hudi "
          "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')")
spark.sql("INSERT INTO tiny VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 1)")
"""
CASES = ("cli_cold", "cli_warm", "cli_none", "first_write", "cli_server")


def _env(tree: str | None, cds: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"}
    env["SQLEXT_CLASS_DATA_SHARING"] = "on" if cds else "off"
    env["PYSPARK_PYTHON"] = sys.executable
    if tree:
        env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "sqlext.cli", *args]


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def _stop_metastore(cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(_cli("metastore", "stop", "--warehouse", str(cwd / "spark-warehouse")), cwd=cwd, env=env,
                   capture_output=True, timeout=120)


def _local_flag(env: dict[str, str]) -> list[str]:
    """`--local` (never reuse a server) where the tree's CLI has it: older trees have no server reuse to turn
    off."""
    usage = subprocess.run(_cli("sql", "--help"), env=env, capture_output=True, text=True).stdout
    return ["--local"] if "--local" in usage else []


def _run_case(case: str, cwd: Path, env: dict[str, str], local: list[str]) -> float:
    select = _cli("sql", "SELECT 1", *(local if case != "cli_server" else []))
    if case == "cli_cold":
        _stop_metastore(cwd, env)
        return _timed(select, cwd, env)
    if case == "cli_warm":
        _timed(_cli("metastore", "start", "--warehouse", str(cwd / "spark-warehouse"), "--idle-timeout", "600"),
               cwd, env)
        return _timed(select, cwd, env)
    if case == "cli_none":
        return _timed(select + ["--metastore", "none"], cwd, env)
    if case == "first_write":
        _timed(_cli("metastore", "start", "--warehouse", str(cwd / "spark-warehouse"), "--idle-timeout", "600"),
               cwd, env)
        shutil.rmtree(cwd / "spark-warehouse" / "tiny", ignore_errors=True)
        _timed(_cli("sql", "DROP TABLE IF EXISTS tiny", *local), cwd, env)
        return _timed([sys.executable, "-c", FIRST_WRITE], cwd, env)
    if case == "cli_server":
        return _timed(select, cwd, env)
    raise ValueError(case)


def _with_server(cwd: Path, env: dict[str, str]):
    proc = subprocess.Popen(_cli("serve", "--port", "0", "--http-port", "none"), cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if "listening" not in line:
        proc.kill()
        raise RuntimeError(f"sqlext serve did not start: {line!r}")
    return proc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", help="run this checkout's code instead (before figures)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--cds", default="on,off", help="class data sharing settings to run: on,off")
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        cwd = Path(tmp)
        for cds in [s == "on" for s in args.cds.split(",")]:
            env = _env(args.tree, cds)
            local = _local_flag(env)  # asked once per tree and setting
            for case in cases:
                server = _with_server(cwd, env) if case == "cli_server" else None
                try:
                    times = [_run_case(case, cwd, env, local) for _ in range(args.runs)]
                finally:
                    if server is not None:
                        server.terminate()
                        server.wait(timeout=60)
                row = {"case": case, "cds": cds, "tree": args.tree or "HEAD", "median_s": round(statistics.median(times), 2),
                       "runs_s": [round(t, 2) for t in times]}
                results.append(row)
                print(json.dumps(row), flush=True)
        _stop_metastore(cwd, _env(args.tree, True))
    print(f"\n{'case':<12} {'cds':<5} {'median s':>9}  runs")
    for row in results:
        print(f"{row['case']:<12} {'on' if row['cds'] else 'off':<5} {row['median_s']:>9.2f}  {row['runs_s']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
