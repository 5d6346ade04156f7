"""The `sqlext` command line.

    sqlext sql "STMT; STMT" [-f script.sql] [--output table|csv|json] [--conf k=v ...] [--metastore URI|embedded|none]
               [--server HOST:PORT | --local] [--user NAME]
    sqlext shell [same options]        interactive: statements end with `;`, may span lines; history (readline)
    sqlext metastore start [--warehouse DIR] [--idle-timeout SECONDS]    a long-lived embedded metastore
    sqlext metastore status [--warehouse DIR | --all] [--json]            every one of this user (or one)
    sqlext metastore stop [--warehouse DIR | --all]                       --all: orphans too (warehouse deleted)
    sqlext serve [--host H] [--port P] [--http-port P|none] [--auth nosasl|none|plain] [--users FILE] [...]
    sqlext serve --add-user NAME --users FILE     (password from the terminal, or one line of stdin)
    sqlext demo [--path DIR]
    sqlext config [--key K]            the hoodie.* keys: default, whether honoured here, doc

Every statement runs through `sqlext.session()` (the Hudi SQL front end); each statement that returns columns
prints its rows. An error prints `error: line L:C: message` to stderr and the exit code is 1 (2 for bad usage);
statements before it have run. Spark's console progress bar shows on stderr during long statements.

`sql` and `shell` send their statements to a running `sqlext serve` instead of starting Spark in this process
(`select 1`: ~1 s instead of ~8 s on 2 cores) when one is registered for the same warehouse (`--warehouse`, else ./spark-warehouse;
sqlext.server.registry) and on the catalog a local run would use (the warehouse's embedded metastore, or
$HIVE_METASTORE_URIS), unless --local, --conf, --master or --metastore is given: those configure a Spark of
this process. A line on stderr names the server. A server checking passwords (auth plain) is used only with
`--user NAME` and the password in $SQLEXT_PASSWORD. `--server HOST:PORT` names a server (its --conf pairs are
settings of the server session). Statements are split here and sent one at a time over the HiveServer2
protocol (sqlext.server.client), in one server session (SET and USE last for the run); results print as above,
and Ctrl-C cancels the running statement on the server.
The server answers SHOW TABLES in HiveQL's column order for BI clients: the CLI shows Spark's, as a local run.
Values print as in a local run, except two types that travel as text: a STRUCT prints as a JSON object (Spark's
to_json, without its NULL fields) where a local run prints the array of its field values, and an interval as
Spark's literal (INTERVAL '1' DAY) where a local run prints Python's timedelta.
"""
from __future__ import annotations

import argparse
import base64
import csv
import datetime as dt
import decimal
import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, TextIO

from storage.exception import HoodieError

if TYPE_CHECKING:
    from sqlext.server.client import Credentials, Endpoint, HiveServerClient
    from sqlext.server.registry import ServerRecord

log = logging.getLogger("sqlext.cli")

OUTPUTS = ("table", "csv", "json")
PROMPT, CONTINUATION = "sqlext> ", "     -> "
HISTORY_FILE = os.path.expanduser("~/.sqlext_history")
PASSWORD_ENV = "SQLEXT_PASSWORD"
# options that configure a Spark of this process: given, the statements run here, never on a server
LOCAL_ONLY_OPTIONS = ("conf", "master", "metastore")

# a statement's result for printing: column names and up to --max-rows + 1 rows (one more says more exist)
Result = tuple[list[str], Sequence[Sequence]]
Runner = Callable[[str], Result]


class CliError(HoodieError):
    """A problem the user can fix (bad option, missing file): printed without a traceback."""


# -- argument parsing ---------------------------------------------------------------------------------
def _session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", "-o", choices=OUTPUTS, default="table", help="result format (default table)")
    parser.add_argument("--conf", "-c", action="append", default=[], metavar="KEY=VALUE",
                        help="Spark or hoodie.* setting (repeatable)")
    parser.add_argument("--metastore", metavar="URI|embedded|none",
                        help="Hive Metastore: thrift://host:port, 'embedded' (the warehouse's own) or 'none'; "
                             "default: $HIVE_METASTORE_URIS, else embedded")
    parser.add_argument("--warehouse", metavar="DIR", help="Spark SQL warehouse directory")
    parser.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    parser.add_argument("--max-rows", type=int, default=10000, help="rows printed per statement (default 10000)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sqlext", description="Hudi tables on Spark through SQL")
    parser.add_argument("--verbose", "-v", action="store_true", help="log INFO messages to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    sql = sub.add_parser("sql", help="run SQL statements (separated by ';') and print their results")
    sql.add_argument("statements", nargs="?", help="SQL text")
    sql.add_argument("-f", "--file", help="read the SQL from this file ('-' for stdin)")
    _session_options(sql)
    _server_options(sql)
    shell = sub.add_parser("shell", help="interactive SQL prompt")
    _session_options(shell)
    _server_options(shell)
    ms = sub.add_parser("metastore", help="embedded Hive Metastores: start a long-lived one, list them, stop them")
    ms.add_argument("action", choices=("start", "stop", "status"))
    ms.add_argument("--warehouse", metavar="DIR",
                    help="warehouse directory (default: the sqlext default; for status: every metastore)")
    ms.add_argument("--idle-timeout", type=int, metavar="SECONDS",
                    help="start: stop it after this many seconds unused (default: keep it until stopped)")
    ms.add_argument("--all", action="store_true",
                    help="status, stop: every embedded metastore of this user, including orphans (whose warehouse "
                         "was deleted)")
    ms.add_argument("--json", action="store_true", help="status: one JSON object per metastore")
    _serve_options(sub.add_parser("serve", help="HiveServer2-protocol (Thrift) server: JDBC, beeline, PyHive, "
                                                "BI tools run SQL through the Hudi SQL front end"))
    timeline = sub.add_parser("timeline", help="a table's timeline as text, and as a picture with --png")
    timeline.add_argument("table", help="base path of the table, or its name (db.table) in the metastore")
    timeline.add_argument("--png", metavar="FILE", help="draw the timeline and the file layout into FILE")
    timeline.add_argument("--limit", type=int, default=100, help="instants printed, newest first (default 100)")
    _session_options(timeline)
    demo = sub.add_parser("demo", help="create a table, write, upsert, delete and query it")
    demo.add_argument("--path")
    services = sub.add_parser("services", help="table services (compaction, clustering, clean, archival) in a "
                                                "process of their own, beside the writers")
    services.add_argument("action", choices=("run",))
    services.add_argument("--path", required=True, help="base path of the table")
    for name in TABLE_SERVICES:
        services.add_argument(f"--{name}", action="store_true", help=f"run {name} (default: every service)")
    services.add_argument("--min-sync-interval", type=float, default=60.0, metavar="SECONDS",
                          help="seconds between the starts of two rounds (default 60)")
    services.add_argument("--max-rounds", type=int, metavar="N", help="stop after N rounds (default: until stopped)")
    services.add_argument("--once", action="store_true", help="one round, then exit (as --max-rounds 1)")
    services.add_argument("--conf", "-c", action="append", default=[], metavar="KEY=VALUE",
                          help="hoodie.* option of the services (lock provider, triggers) or Spark setting")
    services.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    config = sub.add_parser("config", help="the hoodie.* keys this engine knows: default, honoured, doc")
    config.add_argument("--key", help="only this key (or one of its alternative spellings)")
    return parser


def _server_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--server", metavar="HOST:PORT",
                       help="run the statements on this sqlext serve (HiveServer2 binary port)")
    where.add_argument("--local", action="store_true",
                       help="run in this process even when a sqlext serve of the warehouse is running")
    parser.add_argument("--user", metavar="NAME", help=f"log in to the server as NAME, password from ${PASSWORD_ENV} "
                                                       f"(needed for servers that check passwords)")


def _serve_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="binary Thrift port, NOSASL and SASL (default 10000; "
                                                              "0: any free port)")
    serve.add_argument("--http-port", default=None, metavar="PORT|none",
                       help="HTTP transport port, path /cliservice (default 10001; 0: any free port; none: off)")
    serve.add_argument("--auth", choices=("nosasl", "none", "plain"), default=None,
                       help="nosasl/none: no password check; plain: SASL PLAIN / HTTP Basic against --users "
                            "(default: plain with --users, else none)")
    serve.add_argument("--users", metavar="FILE", help="users file (salted scrypt hashes)")
    serve.add_argument("--add-user", metavar="NAME", help="add NAME to --users (or change its password) and exit")
    serve.add_argument("--data-root", action="append", default=None, metavar="DIR",
                       help="a directory beside the warehouse that statements may name paths in (repeatable)")
    serve.add_argument("--audit-log", metavar="FILE", help="append one JSON line per statement to FILE")
    serve.add_argument("--ssl-cert", metavar="PEM", help="TLS certificate (chain) for both transports; plaintext "
                                                          "clients are then refused")
    serve.add_argument("--ssl-key", metavar="PEM", help="the certificate's private key (default: in --ssl-cert)")
    serve.add_argument("--policy", metavar="FILE", help="grants of SELECT / MODIFY / ADMIN on tables to users and "
                                                        "groups (sqlext/server/authorization.py)")
    serve.add_argument("--grant", metavar="'PRIV ON OBJECT TO USER|GROUP NAME'",
                       help="add a grant to --policy FILE and exit")
    serve.add_argument("--revoke", metavar="'PRIV ON OBJECT TO USER|GROUP NAME'",
                       help="remove a grant from --policy FILE and exit")
    serve.add_argument("--allow-unsafe-statements", action="store_true", default=None,
                       help="turn off the safe default: clients may then read any file by path, call Java methods "
                            "(reflect, ADD JAR) and set credentials and endpoints")
    serve.add_argument("--max-message-size", type=int, default=None, metavar="BYTES",
                       help="largest request accepted (default 104857600)")
    serve.add_argument("--max-sessions", type=int, default=None, metavar="N",
                       help="open sessions in all; OpenSession beyond is refused, SQLSTATE 08004 (default 500; "
                            "0: no limit). Per user / address: --conf hive.server2.limit.connections.per.user, "
                            ".per.ipaddress, .per.user.ipaddress=N")
    serve.add_argument("--max-operations-per-session", type=int, default=None, metavar="N",
                       help="statements running at once in one session; more are refused, SQLSTATE 53000, the "
                            "session goes on (default 8; 0: no limit)")
    serve.add_argument("--max-result-rows", type=int, default=None, metavar="N",
                       help="a statement whose result has more rows fails, SQLSTATE 54000, rather than return part "
                            "of it (default 0: no limit)")
    _session_options(serve)


def parse_conf(items: Iterable[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


# -- the session ----------------------------------------------------------------------------------------
def open_session(args):
    import sqlext

    conf = {"spark.ui.showConsoleProgress": "true", **parse_conf(args.conf)}
    metastore = args.metastore
    if metastore is not None and metastore.lower() in ("none", "false", "off"):
        metastore = False
    spark = sqlext.session(master=args.master, warehouse=args.warehouse, conf=conf, metastore=metastore)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# -- a running `sqlext serve` instead of Spark in this process ----------------------------------------------
@dataclass(frozen=True)
class ServerChoice:
    endpoint: Endpoint
    credentials: Credentials | None
    record: ServerRecord | None     # None: named with --server (not discovered)


def _credentials(args) -> Credentials | None:
    from sqlext.server.client import Credentials

    if not args.user:
        return None
    password = os.environ.get(PASSWORD_ENV)
    if password is None:
        raise CliError(f"--user {args.user}: the password is read from ${PASSWORD_ENV}, which is not set")
    return Credentials(args.user, password)


def choose_server(args) -> ServerChoice | None:
    """The server to run the statements on: --server's, else one discovered for the warehouse; None: local."""
    from sqlext.server.client import Endpoint

    if args.local:
        return None
    credentials = _credentials(args)
    if args.server is None:
        return discover_server(args, credentials)
    spark_options = [f"--{name}" for name in ("master", "metastore", "warehouse") if getattr(args, name)]
    if spark_options:
        raise CliError(f"{', '.join(spark_options)} configure Spark in this process: not with --server")
    try:
        return ServerChoice(Endpoint.parse(args.server), credentials, None)
    except ValueError as exc:
        raise CliError(f"--server {exc}") from None


def discover_server(args, credentials: Credentials | None) -> ServerChoice | None:
    """The newest live server of the warehouse that would do what a local run does; None when there is none,
    or when an option configures the Spark of this process."""
    from sqlext.server.client import Endpoint
    from sqlext.server.registry import live_servers
    from sqlext.session import METASTORE_ENV, default_warehouse

    local_only = [f"--{name}" for name in LOCAL_ONLY_OPTIONS if getattr(args, name)]
    if local_only:
        log.info("%s given: running in this process", ", ".join(local_only))
        return None
    warehouse = Path(args.warehouse or default_warehouse()).absolute()
    for record in live_servers(warehouse):
        reason = unusable_reason(record, credentials, os.environ.get(METASTORE_ENV))
        if reason is None:
            return ServerChoice(Endpoint(record.host, record.port), credentials, record)
        log.info("sqlext serve at %s:%d (pid %d) not used: %s", record.host, record.port, record.pid, reason)
    return None


def unusable_reason(record: ServerRecord, credentials: Credentials | None, metastore_env: str | None) -> str | None:
    """Why a discovered server would not do what a local run would (None: it would)."""
    from sqlext.server.config import AUTH_PLAIN

    if record.auth == AUTH_PLAIN and credentials is None:
        return f"it checks passwords (--user NAME with ${PASSWORD_ENV})"
    # a local run uses $HIVE_METASTORE_URIS, else the warehouse's embedded metastore: another catalog would
    # answer from other tables
    if metastore_env and record.metastore != metastore_env:
        return f"its metastore is {record.metastore or 'none'}, not $HIVE_METASTORE_URIS ({metastore_env})"
    if not metastore_env and not record.embedded_metastore:
        return f"its metastore is {record.metastore or 'none'}, not the warehouse's embedded one"
    return None


def connect_server(choice: ServerChoice, conf: dict[str, str]) -> HiveServerClient | None:
    """A client session on the chosen server; None when a discovered server does not answer (then the
    statements run here). Login and session errors are the user's to see."""
    from sqlext.server.client import HiveServerClient, HoodieServerConnectionError

    client = HiveServerClient(choice.endpoint, choice.credentials, conf)
    try:
        client.open()
    except HoodieServerConnectionError as exc:
        if choice.record is None:
            raise
        print(f"sqlext: sqlext serve at {choice.endpoint} did not answer ({exc}); running in this process",
              file=sys.stderr)
        return None
    if choice.record is not None:
        print(f"sqlext: using sqlext serve at {choice.endpoint} (pid {choice.record.pid}); --local runs in this "
              f"process", file=sys.stderr)
    return client


def server_runner(client: HiveServerClient, max_rows: int) -> Runner:
    def run(text: str) -> Result:
        result = client.query(text, limit=max_rows + 1)
        return spark_column_order(text, result.names, result.rows)
    return run


def spark_column_order(statement: str, columns: list[str], rows: Sequence[Sequence]) -> Result:
    """The server answers SHOW TABLES with the table name first, for BI clients that read row[0]
    (sqlext.server.hive_compat); the CLI prints Spark's columns, as a local run does."""
    from sqlext.server.hive_compat import SHOW_TABLES, TABLE_FIRST

    spark_first = ["namespace", "tableName", "isTemporary"]
    if not SHOW_TABLES.match(statement) or columns[:3] != list(TABLE_FIRST):
        return columns, rows
    order = [columns.index(c) for c in spark_first] + list(range(3, len(columns)))
    return [columns[i] for i in order], [[row[i] for i in order] for row in rows]


# -- printing results ------------------------------------------------------------------------------------
def _json_value(value):
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if hasattr(value, "asDict"):
        return _json_value(value.asDict(recursive=True))
    return value


def _text(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)) or hasattr(value, "asDict"):
        return json.dumps(_json_value(value), separators=(",", ":"))
    return str(value)


def dataframe_rows(df, max_rows: int) -> Result:
    """A DataFrame's columns and up to `max_rows` + 1 of its rows (none for a result without columns)."""
    columns = df.columns
    return columns, (df.limit(max_rows + 1).collect() if columns else [])


def print_result(columns: list[str], rows: Sequence[Sequence], fmt: str, out: TextIO, max_rows: int) -> None:
    """Print a statement's result (nothing for a result without columns, e.g. DDL); `rows` beyond `max_rows`
    only say that more exist."""
    if not columns:
        return
    more = len(rows) > max_rows
    rows = rows[:max_rows]
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else _text(v) for v in row] for row in rows])
    elif fmt == "json":
        for row in rows:
            out.write(json.dumps({c: _json_value(v) for c, v in zip(columns, row)}) + "\n")
    else:
        cells = [[_text(v) for v in row] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        out.write(rule + "\n")
        out.write("|" + "|".join(f" {c:<{w}} " for c, w in zip(columns, widths)) + "|\n")
        out.write(rule + "\n")
        for r in cells:
            out.write("|" + "|".join(f" {v:<{w}} " for v, w in zip(r, widths)) + "|\n")
        out.write(rule + "\n")
        out.write(f"{len(rows)} row{'s' if len(rows) != 1 else ''}{' (more not shown)' if more else ''}\n")
    if more:
        print(f"warning: only the first {max_rows} rows are shown (--max-rows)", file=sys.stderr)
    out.flush()


# -- running statements ---------------------------------------------------------------------------------
def error_text(exc: BaseException, statement=None) -> str:
    """`line L:C: message` for the user (positions relative to the whole script)."""
    from sqlext.server.client import HoodieServerStatusError
    from sqlext.sql import HoodieSqlError
    from sqlext.sql.assign import spark_message

    if isinstance(exc, HoodieServerStatusError):
        return _server_error_text(exc.message, statement)
    if isinstance(exc, HoodieSqlError):
        message = exc.message
        line, col = exc.line, exc.col
        if line is not None and statement is not None:
            line, col = statement.position.absolute(line, col)
        return f"line {line}:{col}: {message}" if line is not None else message
    message = spark_message(exc)
    where = f"line {statement.position.line}:{statement.position.col}: " if statement is not None else ""
    return f"{where}{message}"


_SERVER_POSITION = re.compile(r"^line (\d+):(\d+): ")


def _server_error_text(message: str, statement) -> str:
    """The server's message after the statement's position; a position the server gives is within the
    statement it got, made relative to the whole script as for errors of a local run."""
    if statement is None:
        return message
    found = _SERVER_POSITION.match(message)
    if found is None:
        return f"line {statement.position.line}:{statement.position.col}: {message}"
    line, col = statement.position.absolute(int(found.group(1)), int(found.group(2)))
    return f"line {line}:{col}: {message[found.end():]}"


def run_script(run: Runner, text: str, fmt: str, out: TextIO, max_rows: int) -> int:
    """Run each statement of `text` with `run` (local_runner / server_runner), printing results; stop at the
    first error (exit code 1)."""
    from sqlext.sql.errors import HoodieSqlError
    from sqlext.sql.splitter import split_statements

    try:
        statements = split_statements(text)
    except HoodieSqlError as exc:
        print(f"error: {error_text(exc)}", file=sys.stderr)
        return 1
    for statement in statements:
        try:
            print_result(*run(statement.text), fmt, out, max_rows)
        except Exception as exc:  # noqa: BLE001 - every failure is reported the same way
            log.debug("statement failed", exc_info=True)
            print(f"error: {error_text(exc, statement)}", file=sys.stderr)
            return 1
    return 0


def local_runner(spark, max_rows: int) -> Runner:
    return lambda text: dataframe_rows(spark.sql(text), max_rows)


def _complete(buffer: str) -> bool:
    """Whether the buffered text ends a statement: its last significant character is a `;` outside quotes."""
    from sqlext.sql.splitter import split_statements

    if not buffer.rstrip().endswith(";"):
        return False
    try:
        split_statements(buffer)
    except Exception:  # an unterminated quote: the `;` is inside it
        return False
    return True


SHELL_HELP = """Statements end with ';' and may span lines; results print as the --output format says.
  help              this text
  exit, quit        leave the shell (end of input too)
  CALL help();      the CALL procedures; CALL help(cmd => 'run_clean') one of them, or a hoodie.* key
  SHOW TABLES;      Hudi tables (with the _ro / _rt views of merge-on-read ones) and Spark's
"""


def shell(run: Runner, fmt: str, stdin: TextIO, out: TextIO, max_rows: int) -> int:
    """Read statements ending in `;` (over several lines) and run them; errors are reported and the prompt
    goes on. Exit code 1 when any statement failed (useful when stdin is a file or a pipe)."""
    interactive = stdin.isatty()
    if interactive:
        _enable_history()
    buffer, failed = "", False
    while True:
        prompt = (CONTINUATION if buffer else PROMPT) if interactive else ""
        try:
            line = input(prompt) if interactive else stdin.readline()
        except EOFError:
            line = ""
        except KeyboardInterrupt:
            print("", file=out)
            buffer = ""
            continue
        if not interactive and line == "":
            break
        if interactive and line == "" and not buffer:
            continue
        command = line.strip().rstrip(";").lower() if not buffer else ""
        if command in ("exit", "quit"):
            break
        if command in ("help", "?", "\\h"):  # the shell's own words, not SQL for Spark
            out.write(SHELL_HELP)
            continue
        buffer += line if line.endswith("\n") else line + "\n"
        if _complete(buffer):
            failed = run_script(run, buffer, fmt, out, max_rows) != 0 or failed
            buffer = ""
    if buffer.strip():
        failed = run_script(run, buffer, fmt, out, max_rows) != 0 or failed
    return 1 if failed else 0


def _enable_history() -> None:
    try:
        import atexit
        import readline

        if os.path.exists(HISTORY_FILE):
            readline.read_history_file(HISTORY_FILE)
        atexit.register(readline.write_history_file, HISTORY_FILE)
    except Exception as exc:  # no readline (or an unwritable home): the prompt works without history
        log.debug("no history: %s", exc)


def metastore(args, out: TextIO) -> int:
    """`sqlext metastore start|status|stop`: a long-lived (service) metastore, this user's metastores."""
    from catalog import embedded_metastores, metastore_status, start_metastore, stop_metastore

    if args.all and (args.action == "start" or args.warehouse):
        raise CliError("--all goes with `metastore status` or `metastore stop`, without --warehouse")
    if args.idle_timeout is not None and (args.action != "start" or args.idle_timeout < 0):
        raise CliError("--idle-timeout SECONDS (>= 0) goes with `metastore start`")
    if args.json and args.action != "status":
        raise CliError("--json goes with `metastore status`")
    if args.action == "start":
        out.write(start_metastore(args.warehouse, keep_alive=True, idle_timeout_s=args.idle_timeout) + "\n")
    elif args.action == "stop" and args.all:
        stopped = [line for m in embedded_metastores() if (line := _stop_line(m))]
        out.write("".join(f"{line}\n" for line in stopped) or "no embedded metastore running\n")
    elif args.action == "stop":
        out.write(("stopped" if stop_metastore(args.warehouse) else "not running") + "\n")
    elif args.warehouse:
        out.write(json.dumps(metastore_status(args.warehouse), default=str) + "\n")
    else:
        _print_metastores([m.status() for m in embedded_metastores()], args.json, out)
    return 0


def _stop_line(metastore) -> str | None:
    """Stop one metastore of `stop --all`; what to print (None when it had stopped by itself meanwhile)."""
    orphans = [] if metastore.is_running() else metastore.orphans()
    if not metastore.stop():
        return None
    problem = f" (orphan: {orphans[0].problem})" if orphans else ""
    return f"stopped {metastore.paths.warehouse}{problem}"


def _print_metastores(statuses: list[dict], as_json: bool, out: TextIO) -> None:
    if as_json:
        out.write("".join(json.dumps(s, default=str) + "\n" for s in statuses))
        return
    if not statuses:
        out.write("no embedded metastore running\n")
        return
    columns = ("warehouse", "pid", "port", "mode", "idle_s", "leases", "connections")
    # an orphan running next to a newer metastore of the same path gets a row of its own
    statuses = [*statuses, *({"warehouse": s["warehouse"], "mode": "orphan", **o} for s in statuses
                             for o in s.get("orphans", []) if o["pid"] != s.get("pid"))]
    rows = [[str(len(s.get(c) or []) if c == "leases" else s.get(c, "")) for c in columns] for s in statuses]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    for row in [list(columns), *rows]:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")
    for s in statuses:
        if s.get("mode") == "orphan":  # why it is one
            out.write(f"orphan pid {s['pid']}: {s['problem']} (`sqlext metastore stop --all` ends it)\n")


def serve(args) -> int:
    """`sqlext serve`: run the server (or, with --add-user, add a user to the users file)."""
    from sqlext.server.config import ServerConfig

    if args.add_user:
        return add_user(args.add_user, args.users, sys.stdin)
    if args.grant or args.revoke:
        return change_grant(args.policy, args.grant or args.revoke, revoke=bool(args.revoke))
    conf = parse_conf(args.conf)
    http_port = args.http_port
    if http_port is not None:
        try:
            http_port = None if http_port.lower() == "none" else int(http_port)
        except ValueError:
            raise CliError(f"--http-port {args.http_port!r}: expected a port number or 'none'") from None
    try:
        config, spark_conf = ServerConfig.from_conf(
            conf, host=args.host, port=args.port, auth=args.auth, users_file=args.users,
            max_message_size=args.max_message_size, allow_unsafe_statements=args.allow_unsafe_statements,
            data_roots=tuple(args.data_root) if args.data_root else None, audit_log=args.audit_log,
            policy_file=args.policy, ssl_cert=args.ssl_cert, ssl_key=args.ssl_key, max_sessions=args.max_sessions,
            max_operations_per_session=args.max_operations_per_session, max_result_rows=args.max_result_rows)
        if args.http_port is not None:
            from dataclasses import replace

            config = replace(config, http_port=http_port)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    from sqlext.server.server import serve as run_server

    args.conf = ["spark.ui.showConsoleProgress=false"] + [f"{k}={v}" for k, v in spark_conf.items()]
    spark = open_session(args)
    try:
        run_server(spark, config, announce=lambda line: print(line, flush=True))
    finally:
        spark.stop()
    return 0


def change_grant(policy: str | None, statement: str, revoke: bool) -> int:
    from sqlext.server.authorization import PolicyFile

    if not policy:
        raise CliError(f"--{'revoke' if revoke else 'grant'} needs --policy FILE")
    try:
        grant = PolicyFile(policy).change(statement, revoke)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    print(f"{'revoked' if revoke else 'granted'} {grant.privilege} on {grant.object} "
          f"{'from' if revoke else 'to'} {grant.kind.lower()} {grant.principal} in {policy}")
    return 0


def add_user(name: str, users: str | None, stdin: TextIO) -> int:
    from sqlext.server.auth import UsersFile

    if not users:
        raise CliError("--add-user needs --users FILE")
    if stdin.isatty():
        import getpass

        password = getpass.getpass(f"password for {name}: ")
        if getpass.getpass("again: ") != password:
            raise CliError("the passwords differ")
    else:
        password = stdin.readline().rstrip("\r\n")
    new = UsersFile(users).add(name, password)
    print(f"{'added' if new else 'updated'} user {name} in {users}")
    return 0


def timeline(args, out: TextIO) -> int:
    """`sqlext timeline TABLE [--png FILE]`: a path needs no Spark; a name is resolved through a session."""
    from sqlext.sql.resolver import is_hudi_table
    from sqlext.timeline_view import draw_timeline_png, timeline_entries
    from storage.table.meta_client import HoodieTableMetaClient

    if is_hudi_table(args.table):
        path = args.table
    elif "/" in args.table:
        raise CliError(f"{args.table}: not a Hudi table (no .hoodie/hoodie.properties)")
    else:
        path = _table_path(args)
    meta = HoodieTableMetaClient.load(path)
    entries = timeline_entries(meta)[::-1][: max(args.limit, 0)]
    header = ("instant_time", "action", "state", "completion_time", "files", "partitions", "records")
    rows = [(e.instant_time, e.action, e.state, e.completion_time or "", e.files_touched, e.partitions_touched,
             e.records_written) for e in entries]
    widths = [max(len(str(v)) for v in col) for col in zip(header, *rows)]
    for row in (header, *rows):
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)
    if args.png:
        print(f"wrote {draw_timeline_png(meta, args.png)}", file=out)
    return 0


TABLE_SERVICES = ("compaction", "clustering", "clean", "archive")


def services(args, out: TextIO) -> int:
    """`sqlext services run --path P [--compaction] [--clustering] [--clean] [--archive]`: rounds until stopped
    (Ctrl-C, SIGTERM) or --max-rounds; exit 1 when the last round had errors."""
    import signal
    import threading

    from storage.config import KEY_PREFIX, HoodieConfig
    from storage.table_service.table_service_job import TableServices, check_concurrency_config, run_continuously

    conf = parse_conf(args.conf)
    config = HoodieConfig.of({k: v for k, v in conf.items() if k.startswith(KEY_PREFIX)})
    check_concurrency_config(config, args.path)  # before Spark starts
    chosen = [n for n in TABLE_SERVICES if getattr(args, n)]
    which = TableServices(**{n: (not chosen or n in chosen) for n in TABLE_SERVICES})
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    args.metastore, args.warehouse = "none", None
    args.conf = [f"{k}={v}" for k, v in conf.items() if not k.startswith(KEY_PREFIX)]
    spark = open_session(args)
    rounds = []
    try:
        rounds = run_continuously(spark, args.path, which, config, args.min_sync_interval,
                                  1 if args.once else args.max_rounds, stop)
    except KeyboardInterrupt:
        pass
    for number, done in enumerate(rounds, 1):
        print(f"round {number}: {done.summary()}", file=out)
        for error in done.errors:
            print(f"  error: {error}", file=out)
    return 1 if rounds and rounds[-1].errors else 0


def _table_path(args) -> str:
    from sqlext.sql.resolver import TableName

    spark = open_session(args)
    try:
        ref = spark._sqlext_frontend.resolver.resolve(TableName.parse(args.table))
    finally:
        spark.stop()
    if ref is None:
        raise CliError(f"{args.table}: neither a Hudi table's base path nor a Hudi table of the metastore")
    return ref.path


def _sql_text(args) -> str:
    if args.file and args.statements:
        raise CliError("give the SQL either as an argument or with -f, not both")
    if args.file:
        if args.file == "-":
            return sys.stdin.read()
        try:
            with open(args.file, encoding="utf-8") as fh:
                return fh.read()
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror}") from exc
    if args.statements is None:
        raise CliError("no SQL given: sqlext sql \"STATEMENT; ...\" or sqlext sql -f FILE")
    return args.statements


def sql_or_shell(args) -> int:
    """`sqlext sql` / `sqlext shell`: on a running sqlext serve when there is one to use, else in this process."""
    text = _sql_text(args) if args.command == "sql" else None
    conf = parse_conf(args.conf)  # bad --conf fails before Spark starts
    choice = choose_server(args)
    client = connect_server(choice, conf) if choice is not None else None
    if client is not None:
        try:
            return run_statements(args, text, server_runner(client, args.max_rows))
        finally:
            client.close()
    spark = open_session(args)
    try:
        return run_statements(args, text, local_runner(spark, args.max_rows))
    finally:
        spark.stop()


def run_statements(args, text: str | None, run: Runner) -> int:
    if args.command == "sql":
        return run_script(run, text, args.output, sys.stdout, args.max_rows)
    return shell(run, args.output, sys.stdin, sys.stdout, args.max_rows)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # PySpark logs every failed query as a JSON dump; the CLI prints the message itself
        from pyspark.logger import PySparkLogger

        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    try:
        if args.command == "demo":
            from sqlext.demo import main as demo_main

            return demo_main(["--path", args.path] if args.path else [])
        if args.command == "metastore":
            return metastore(args, sys.stdout)
        if args.command == "serve":
            return serve(args)
        if args.command == "timeline":
            return timeline(args, sys.stdout)
        if args.command == "services":
            return services(args, sys.stdout)
        if args.command == "config":
            from sqlext.config_doc import config_text

            sys.stdout.write(config_text(args.key))
            return 0
        return sql_or_shell(args)
    except CliError as exc:
        print(f"sqlext: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - e.g. an unreachable metastore: the message, no traceback
        log.debug("failed", exc_info=True)
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
