"""`sqlext sql` / `sqlext shell` on a running `sqlext serve` (issue 47 item 8), with real processes.

Once per module, three Spark processes run on one embedded metastore (started first, by this process): two
servers start together, `open` (auth none) on the warehouse `./spark-warehouse` of the directory the CLI runs in
(so found by default, on that warehouse's embedded metastore) and `plain` (auth plain, a users file) on a warehouse
of its own and on that metastore by URI (found by CLIs whose $HIVE_METASTORE_URIS names it); then, once the first
server test has run (and been timed), one local run (`sqlext sql --local`) of the script it ran: its output is the
reference the server's must equal, and it starts its Spark while the other tests run. Every other CLI run is a subprocess talking to a server (about a second each). First, unit tests of the
client's row-set decoding on row sets made by the server's own encoder, and of the registry."""
from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from thrift_server.support import PASSWORD, USER, ServerProcess, client_env, read_lines

# the JVMs of this module's Spark processes compile with C1 only: their start-up CPU (three JVMs on two cores)
# is what this module waits for, never the speed of its tiny queries
SPARK_ENV = {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1"}
STARTUP_GUARD_S = 300   # hang guards only: on a busy 2-core machine a JVM start can take a while
RUN_GUARD_S = 120
NOTICE = "sqlext: using sqlext serve at 127.0.0.1:{port} (pid {pid}); --local runs in this process"

SCRIPT = """CREATE TABLE {t} (id INT, name STRING, price DECIMAL(10,2), ts BIGINT, dt STRING) USING hudi
  PARTITIONED BY (dt) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts');
INSERT INTO {t} VALUES (1, 'a', 1.50, 1, 'd1'), (2, NULL, NULL, 1, 'd2');
SELECT id, name, price, ts, dt FROM {t} ORDER BY id;
CALL show_commits(table => '{t}', limitt => 1);
SELECT 'never runs'
"""


# -- decoding row sets as the server sends them (no server needed) ------------------------------------------
def _round_trip(fields: list, columns: dict[str, list]) -> list[tuple]:
    """Encode with the server's code (schema.table_schema, rowset.to_trowset), decode with the client's."""
    from pyspark.sql import types as T

    from sqlext.server.client import column_info, decode_rowset
    from sqlext.server.rowset import to_trowset
    from sqlext.server.schema import table_schema, wire_of

    schema = T.StructType(fields)
    table = pa.table(columns)
    rowset = to_trowset(table, [wire_of(f.dataType) for f in fields], 0)
    infos = [column_info(desc) for desc in table_schema(schema, 0).columns]
    assert [i.name for i in infos] == [f.name for f in fields]
    return decode_rowset(rowset, infos)


def test_decoding_typed_columns_with_nulls():
    from pyspark.sql import types as T

    fields = [T.StructField("b", T.BooleanType()), T.StructField("t", T.ByteType()),
              T.StructField("s", T.ShortType()), T.StructField("i", T.IntegerType()),
              T.StructField("l", T.LongType()), T.StructField("d", T.DoubleType()),
              T.StructField("f", T.FloatType()), T.StructField("bin", T.BinaryType()),
              T.StructField("str", T.StringType())]
    n = 11  # more than 8 values: the nulls bitmap spans two bytes
    cols = {"b": [True, None] + [False] * (n - 2), "t": [1, None] + [-3] * (n - 2),
            "s": [300, None] + [0] * (n - 2), "i": [None] * (n - 1) + [7],
            "l": [2 ** 40, None] + [-(2 ** 62)] * (n - 2), "d": [1.5, None] + [float("inf")] * (n - 2),
            "f": pa.array([0.25, None] + [2.0] * (n - 2), pa.float32()), "bin": [b"\x00\x01", None] + [b""] * (n - 2),
            "str": ["x", None] + ["é"] * (n - 3) + [""]}
    rows = _round_trip(fields, cols)
    assert rows[0] == (True, 1, 300, None, 2 ** 40, 1.5, 0.25, b"\x00\x01", "x")
    assert rows[1] == (None,) * 9
    assert rows[-1] == (False, -3, 0, 7, -(2 ** 62), float("inf"), 2.0, b"", "")
    assert [type(v) for v in rows[0]] == [bool, int, int, type(None), int, float, float, bytes, str]


def test_decoding_values_that_travel_as_text():
    """DECIMAL, DATE, TIMESTAMP, ARRAY, MAP, STRUCT go as strings (Spark's CAST / to_json in the server) and
    come back as PySpark's collect() gives them; NULL-typed and interval columns stay text or None."""
    from pyspark.sql import types as T

    fields = [T.StructField("dec", T.DecimalType(10, 2)), T.StructField("day", T.DateType()),
              T.StructField("ts", T.TimestampType()), T.StructField("ntz", T.TimestampNTZType()),
              T.StructField("arr", T.ArrayType(T.IntegerType())), T.StructField("m", T.MapType(T.StringType(), T.LongType())),
              T.StructField("st", T.StructType([T.StructField("a", T.IntegerType())])),
              T.StructField("nul", T.NullType()), T.StructField("iv", T.DayTimeIntervalType())]
    cols = {"dec": ["12.50", None, "-0.01"], "day": ["2024-01-15", None, "1970-01-01"],
            "ts": ["2024-01-15 10:00:00", None, "2024-01-15 10:00:00.123"],
            "ntz": ["2024-02-29 23:59:59.999999", None, "0001-01-01 00:00:00"],
            "arr": ["[1,null,3]", None, "[]"], "m": ['{"k":1}', None, "{}"], "st": ['{"a":1}', None, "{}"],
            "nul": pa.array([None, None, None], pa.string()), "iv": ["INTERVAL '1' DAY", None, "INTERVAL '0' DAY"]}
    first, second, third = _round_trip(fields, cols)
    assert first == (decimal.Decimal("12.50"), dt.date(2024, 1, 15), dt.datetime(2024, 1, 15, 10),
                     dt.datetime(2024, 2, 29, 23, 59, 59, 999999), [1, None, 3], {"k": 1}, {"a": 1}, None,
                     "INTERVAL '1' DAY")
    assert str(first[0]) == "12.50"  # the scale survives, as in a local run
    assert second == (None,) * 9
    assert third[:3] == (decimal.Decimal("-0.01"), dt.date(1970, 1, 1), dt.datetime(2024, 1, 15, 10, 0, 0, 123000))
    assert third[3] == dt.datetime(1, 1, 1)


def test_decoding_keeps_text_python_cannot_hold_and_refuses_row_based_sets():
    from sqlext.server.client import (
        ColumnInfo,
        HoodieServerStatusError,
        decode_rowset,
        null_flags,
    )
    from sqlext.server.third_party.tcliservice.ttypes import (
        TColumn,
        TRowSet,
        TStringColumn,
        TTypeId,
    )

    far = TRowSet(startRowOffset=0, rows=[], columns=[
        TColumn(stringVal=TStringColumn(values=["+10000-01-01 00:00:00", ""], nulls=b"\x02"))])
    assert decode_rowset(far, [ColumnInfo("ts", TTypeId.TIMESTAMP_TYPE)]) == [("+10000-01-01 00:00:00",), (None,)]
    assert null_flags(b"\x01\x80", 16) == [True] + [False] * 14 + [True]
    assert null_flags(b"", 3) == [False, False, False]
    with pytest.raises(HoodieServerStatusError, match="columnar row set"):
        decode_rowset(TRowSet(startRowOffset=0, rows=[]), [ColumnInfo("x", TTypeId.INT_TYPE)])


def test_server_error_positions_become_script_positions():
    from sqlext.cli import error_text
    from sqlext.server.client import HoodieServerStatusError
    from sqlext.sql.splitter import split_statements

    first, second = split_statements("SELECT 1;\n  SELECT x\nFROM t")
    relative = HoodieServerStatusError("line 2:6: no such table t", "42P01")
    assert error_text(relative, second) == "line 3:6: no such table t"
    assert error_text(HoodieServerStatusError("line 1:8: bad", "42000"), second) == "line 2:10: bad"
    assert error_text(HoodieServerStatusError("[DIVIDE_BY_ZERO] Division by zero"), first) == \
        "line 1:1: [DIVIDE_BY_ZERO] Division by zero"


def test_endpoint_parsing():
    from sqlext.server.client import Endpoint

    assert Endpoint.parse("127.0.0.1:10000") == Endpoint("127.0.0.1", 10000)
    assert Endpoint.parse("[::1]:10001") == Endpoint("::1", 10001)
    for bad in ("localhost", "host:", ":1", "host:http", "host:70000"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            Endpoint.parse(bad)


def test_registry_skips_other_machines_and_removes_stale_records(tmp_path):
    from sqlext.server import registry

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]   # nothing listens there once closed
    with socket.create_server(("127.0.0.1", 0)) as listening:
        live = registry.new_record("0.0.0.0", listening.getsockname()[1], "none", str(tmp_path), None, True)
        assert live.host == "127.0.0.1" and live.pid == os.getpid()  # a wildcard bind is reached on the loopback
        path = registry.register(live)
        assert path == tmp_path / ".sqlext" / "servers" / f"{os.getpid()}.json"
        others = {"dead_pid": _with(live, pid=gone.pid), "closed_port": _with(live, port=closed_port),
                  "elsewhere": _with(live, pid=gone.pid, hostname="another-host")}
        for name, record in others.items():   # file names do not matter to readers
            (path.parent / f"{name}.json").write_text(record.to_json())
        assert registry.live_servers(tmp_path) == [live]
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(["elsewhere.json", path.name])
    assert registry.live_servers(tmp_path) == []   # refused now: removed
    assert [p.name for p in path.parent.iterdir()] == ["elsewhere.json"]


def _with(record, **changes):
    from dataclasses import replace

    return replace(record, **changes)


# -- servers ---------------------------------------------------------------------------------------------------
def cli_env(**extra: str) -> dict[str, str]:
    """The CLI's environment: no metastore from the test session (the CLI would then want a server on it) and
    no password unless given."""
    env = {k: v for k, v in client_env().items() if k not in ("HIVE_METASTORE_URIS", "SQLEXT_PASSWORD")}
    return {**env, **extra}


@dataclass
class Launch:
    """`sqlext serve` started now; `ready()` waits for its announce line."""

    proc: subprocess.Popen
    lines: list[str]
    event: threading.Event
    warehouse: Path
    log_path: Path

    @classmethod
    def start(cls, root: Path, warehouse: Path, *args: str) -> Launch:
        log_path = root / f"{warehouse.name}-server.log"
        cmd = [sys.executable, "-m", "sqlext.cli", "-v", "serve", "--port", "0", "--http-port", "none",
               "--warehouse", str(warehouse), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.driver.memory=1g", *args]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=cli_env(**SPARK_ENV),
                                    cwd=root)
        launch = cls(proc, [], threading.Event(), warehouse, log_path)
        threading.Thread(target=read_lines, args=(proc, launch.lines, launch.event), daemon=True).start()
        return launch

    def ready(self) -> ServerProcess:
        self.event.wait(STARTUP_GUARD_S)
        port = next((int(line.rsplit(":", 1)[1].split()[0]) for line in self.lines if "listening on" in line), None)
        if port is None:
            self.stop()
            pytest.fail(f"sqlext serve did not start: {self.lines}\n{self.log_path.read_text()[-5000:]}")
        server = ServerProcess(port, None, self.proc, self.lines)
        server.warehouse, server.launch = self.warehouse, self
        return server

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Servers:
    root: Path
    metastore_uri: str            # the embedded metastore of root/spark-warehouse, shared by all three
    open: ServerProcess           # auth none, on root/spark-warehouse: the default warehouse of CLI runs in root
    plain_launch: Launch          # auth plain, on root/plain-warehouse: waited for by its first user
    local_run: subprocess.Popen | None = None   # the reference: SCRIPT with --local on open's warehouse

    def start_local_run(self) -> subprocess.Popen:
        """Started after the timed server run (its JVM start would take CPU from that run)."""
        if self.local_run is None:
            self.local_run = subprocess.Popen([sys.executable, "-m", "sqlext.cli", "sql", "--local", "-f",
                                               "local.sql"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True, env=cli_env(**SPARK_ENV), cwd=self.root)
        return self.local_run

    @functools.cached_property
    def plain(self) -> ServerProcess:
        return self.plain_launch.ready()


def sqlext_cli(root: Path, *args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sqlext.cli", *args], input=stdin, capture_output=True, text=True,
                          timeout=RUN_GUARD_S, env=env or cli_env(), cwd=root)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    from catalog import EmbeddedMetastore
    from sqlext.server.auth import UsersFile

    root = tmp_path_factory.mktemp("cli-reuse")
    users = root / "users"
    UsersFile(str(users)).add(USER, PASSWORD)
    (root / "local.sql").write_text(SCRIPT.format(t="t_loc"))
    metastore = EmbeddedMetastore(root / "spark-warehouse")
    with pytest.MonkeyPatch.context() as patch:   # its JVM on JIT tier 1 only too: its start-up is waited for
        patch.setenv("JAVA_TOOL_OPTIONS", SPARK_ENV["JAVA_TOOL_OPTIONS"])
        uri = metastore.start()   # one metastore JVM for the three processes, none started twice at once
    launches, servers = [], None
    try:
        launches = [Launch.start(root, root / "spark-warehouse"),
                    Launch.start(root, root / "plain-warehouse", "--auth", "plain", "--users", str(users),
                                 "--metastore", uri)]
        servers = Servers(root, uri, launches[0].ready(), launches[1])
        yield servers
    finally:
        local_run = servers.local_run if servers is not None else None
        if local_run is not None and local_run.poll() is None:
            local_run.kill()
            local_run.communicate()
        for launch in launches:
            launch.stop()
        metastore.stop()


def notice(server: ServerProcess) -> str:
    return NOTICE.format(port=server.port, pid=server.process.pid)


@pytest.fixture(scope="module")
def script_run(servers) -> tuple[subprocess.CompletedProcess, float]:
    """SCRIPT through the open server, found by default (the warehouse of the working directory), and its
    wall time; its table t_srv serves the other tests."""
    (servers.root / "server.sql").write_text(SCRIPT.format(t="t_srv"))
    started = time.monotonic()
    run = sqlext_cli(servers.root, "sql", "-f", "server.sql")
    took = time.monotonic() - started
    servers.start_local_run()
    return run, took


@pytest.fixture(scope="module")
def table(script_run) -> str:
    run, _ = script_run
    assert "| 2  | NULL | NULL  | 1  | d2 |" in run.stdout, run.stderr   # made and written
    return "t_srv"


def test_csv_json_and_max_rows(servers, table):
    query = f"SELECT id, name, price, ts, dt FROM {table} ORDER BY id"
    csv_run = sqlext_cli(servers.root, "sql", "-o", "csv", query)
    assert csv_run.returncode == 0, csv_run.stderr
    assert csv_run.stdout == "id,name,price,ts,dt\n1,a,1.50,1,d1\n2,,,1,d2\n"
    json_run = sqlext_cli(servers.root, "sql", "--output", "json", query)
    assert [json.loads(line) for line in json_run.stdout.splitlines()] == [
        {"id": 1, "name": "a", "price": "1.50", "ts": 1, "dt": "d1"},
        {"id": 2, "name": None, "price": None, "ts": 1, "dt": "d2"}]
    capped = sqlext_cli(servers.root, "sql", "--max-rows", "1", query)
    assert capped.returncode == 0 and "1 row (more not shown)" in capped.stdout and "d2" not in capped.stdout
    assert "warning: only the first 1 rows are shown (--max-rows)" in capped.stderr


def test_an_error_stops_the_script_after_the_statements_before_it(servers, table):
    run = sqlext_cli(servers.root, "sql", f"INSERT INTO {table} VALUES (3, 'c', 3.00, 1, 'd1');\n"
                                          f"SELECT 1 / 0;\nINSERT INTO {table} VALUES (4, 'd', 4.00, 1, 'd1')")
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1].startswith("error: line 2:1: [DIVIDE_BY_ZERO]"), run.stderr
    ids = sqlext_cli(servers.root, "sql", "-o", "csv", f"SELECT id FROM {table} ORDER BY id")
    assert ids.stdout.splitlines() == ["id", "1", "2", "3"]


def test_shell_on_the_server_goes_on_after_errors(servers, table):
    run = sqlext_cli(servers.root, "shell", "-o", "json",
                     stdin=f"SET spark.sql.shuffle.partitions = 5;\nSELECT nope FROM {table};\n"
                           f"SET spark.sql.shuffle.partitions;\nSELECT count(*) AS n\n  FROM {table};\n")
    assert run.returncode == 1   # one statement failed
    assert notice(servers.open) in run.stderr and "error: line 1:8:" in run.stderr and "nope" in run.stderr
    out = [json.loads(line) for line in run.stdout.splitlines()]
    assert out[-2:] == [{"key": "spark.sql.shuffle.partitions", "value": "5"}, {"n": 3}]   # one session


def test_explicit_server_conf_and_usage_errors(servers):
    run = sqlext_cli(servers.root, "sql", "--server", f"127.0.0.1:{servers.open.port}",
                     "--conf", "spark.sql.shuffle.partitions=7", "-o", "csv", "SET spark.sql.shuffle.partitions")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1] == "spark.sql.shuffle.partitions,7"
    assert "using sqlext serve" not in run.stderr
    both = sqlext_cli(servers.root, "sql", "--server", "127.0.0.1:1", "--local", "SELECT 1")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    master = sqlext_cli(servers.root, "sql", "--server", "127.0.0.1:1", "--master", "local[1]", "SELECT 1")
    assert master.returncode == 2 and "--master configure Spark in this process: not with --server" in master.stderr
    nobody = sqlext_cli(servers.root, "sql", "--server", "127.0.0.1:1", "SELECT 1")
    assert nobody.returncode == 1 and nobody.stderr == "error: cannot connect to 127.0.0.1:1: Connection refused\n"


def test_stale_records_are_ignored_and_removed(servers):
    from sqlext.server import registry

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live = registry.read_records(servers.open.warehouse)[0][1]
    stale = registry.register(_with(live, pid=gone.pid, port=1, started_at=time.time()))  # newest, so tried first
    assert stale.exists()
    run = sqlext_cli(servers.root, "sql", "SELECT 42 AS answer")
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0] == notice(servers.open) and "| 42     |" in run.stdout
    assert not stale.exists()


def test_a_server_checking_passwords_needs_credentials(servers, monkeypatch):
    """The plain server is on the shared metastore by URI: CLIs whose $HIVE_METASTORE_URIS names it may use it,
    with --user and $SQLEXT_PASSWORD."""
    from sqlext.cli import build_parser, choose_server
    from sqlext.server import registry

    wh = str(servers.plain.warehouse)

    def chosen(*options: str):
        return choose_server(build_parser().parse_args(["sql", "--warehouse", wh, *options, "SELECT 1"]))

    monkeypatch.delenv("SQLEXT_PASSWORD", raising=False)
    monkeypatch.setenv("HIVE_METASTORE_URIS", servers.metastore_uri)
    assert chosen() is None   # no credentials
    monkeypatch.setenv("SQLEXT_PASSWORD", PASSWORD)
    choice = chosen("--user", USER)
    assert choice.endpoint.port == servers.plain.port and choice.credentials.user == USER
    assert chosen("--user", USER, "--local") is None
    monkeypatch.delenv("HIVE_METASTORE_URIS")
    assert chosen("--user", USER) is None   # a local run would use the warehouse's embedded metastore

    env = cli_env(HIVE_METASTORE_URIS=servers.metastore_uri)
    run = sqlext_cli(servers.root, "sql", "--warehouse", wh, "--user", USER, "-o", "csv", "SELECT 'in' AS logged",
                     env={**env, "SQLEXT_PASSWORD": PASSWORD})
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0] == notice(servers.plain) and run.stdout == "logged\nin\n"
    wrong = sqlext_cli(servers.root, "sql", "--warehouse", wh, "--user", USER, "SELECT 1",
                       env={**env, "SQLEXT_PASSWORD": "wrong"})
    assert wrong.returncode == 1 and wrong.stderr.startswith("error: login refused:"), wrong.stderr
    unset = sqlext_cli(servers.root, "sql", "--warehouse", wh, "--user", USER, "SELECT 1", env=env)
    assert unset.returncode == 2 and "$SQLEXT_PASSWORD, which is not set" in unset.stderr

    servers.plain.launch.stop()   # a server that stops removes its record
    assert servers.plain.process.returncode == 0
    assert registry.read_records(wh) == []


def test_the_server_runs_the_script_as_a_local_run_does(servers, script_run, monkeypatch):
    """The notice on stderr, then the same output as `--local` (which started Spark in its process, no notice)
    for CREATE TABLE ... USING hudi, INSERT, SELECT and a failing CALL that stops the script. Last in the
    module: the local run had the other tests' time."""
    from sqlext.cli import build_parser, choose_server

    remote, remote_s = script_run
    local_out, local_err = servers.start_local_run().communicate(timeout=STARTUP_GUARD_S)
    assert servers.local_run.returncode == 1, local_err[-3000:]
    assert remote.returncode == 1, remote.stderr
    assert remote.stderr.splitlines()[0] == notice(servers.open)
    assert remote.stdout == local_out
    assert "| 1  | a    | 1.50  | 1  | d1 |" in remote.stdout and "never runs" not in remote.stdout
    error = "error: line 5:37: CALL show_commits: unknown argument 'limitt'"
    assert remote.stderr.splitlines()[-1].startswith(error)
    assert [line for line in local_err.splitlines() if line.startswith("error:")] == [remote.stderr.splitlines()[-1]]
    assert "using sqlext serve" not in local_err and "Spark" in local_err   # --local: Spark started in that run
    wh = ["--warehouse", str(servers.open.warehouse)]
    monkeypatch.delenv("HIVE_METASTORE_URIS", raising=False)   # as in the CLI runs (cli_env)
    assert choose_server(build_parser().parse_args(["sql", *wh, "--local", "SELECT 1"])) is None
    assert choose_server(build_parser().parse_args(["sql", *wh, "SELECT 1"])).record.pid == servers.open.process.pid
    assert remote_s < 20, f"{remote_s:.1f} s through the server"
