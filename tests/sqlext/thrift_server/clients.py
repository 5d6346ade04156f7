"""Real HiveServer2 clients, run as separate processes by the tests:

    python clients.py CLIENT '{"port": ..., ...}'

prints one JSON document. `scenario` is the statement sequence every client runs on a table of its own
(CREATE ... USING hudi, INSERT, MERGE INTO, UPDATE, DELETE, CALL show_commits, a time-travel SELECT and a
read back); the tests run the same statements through `spark.sql` and compare the summaries."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import sys


def statements(table: str) -> list[tuple[str, str]]:
    return [
        ("create", f"CREATE TABLE {table} (id BIGINT, name STRING, price DECIMAL(10,2), ts BIGINT) USING hudi "
                   f"TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')"),
        ("insert", f"INSERT INTO {table} VALUES (1, 'a', 1.50, 1), (2, 'b', 2.25, 1), (3, NULL, NULL, 1)"),
        ("merge", f"MERGE INTO {table} t USING (SELECT 2 AS id, 'bb' AS name, CAST(9.99 AS DECIMAL(10,2)) AS price, "
                  f"2L AS ts UNION ALL SELECT 4, 'd', CAST(4 AS DECIMAL(10,2)), 2L) s ON t.id = s.id "
                  f"WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"),
        ("update", f"UPDATE {table} SET name = 'aa' WHERE id = 1"),
        ("delete", f"DELETE FROM {table} WHERE id = 3"),
        ("commits", f"CALL show_commits(table => '{table}', limit => 10)"),
        ("time_travel", f"SELECT id, name, price FROM {table} VERSION AS OF 1 ORDER BY id"),
        ("final", f"SELECT id, name, price FROM {table} ORDER BY id"),
    ]


def normalize(value):
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, float) and value != value:  # pandas NaN for NULL
        return None
    if hasattr(value, "item"):  # numpy scalars
        return normalize(value.item())
    return value


def summarize(name: str, columns: list[str], rows: list) -> dict:
    """What must agree between a client and spark.sql: commit times differ, their number and actions not."""
    rows = [[normalize(v) for v in row] for row in rows]
    if name == "commits":
        action = columns.index("action")
        return {"columns": columns, "actions": sorted(r[action] for r in rows)}
    return {"columns": columns, "rows": rows}


def run_scenario(run, table: str) -> dict:
    """`run(sql) -> (columns, rows)` (columns None when there is no result set)."""
    out = {}
    for name, sql in statements(table):
        columns, rows = run(sql)
        if name != "create":
            out[name] = summarize(name, columns, rows)
    return out


# -- clients -----------------------------------------------------------------------------------------------
def _dbapi_run(cursor):
    def run(sql):
        cursor.execute(sql)
        if not cursor.description:
            return None, []
        return [d[0].split(".")[-1] for d in cursor.description], [list(r) for r in cursor.fetchall()]
    return run


def pyhive(args: dict) -> dict:
    """The scenario over three PyHive connections: NOSASL and NONE on the main server, CUSTOM (user and
    password) on the password-checking server; all of them see the same metastore."""
    from pyhive import hive

    nosasl = hive.connect(host="127.0.0.1", port=args["port"], auth="NOSASL", username="alice").cursor()
    none = hive.connect(host="127.0.0.1", port=args["port"], auth="NONE", username="bob").cursor()
    custom = hive.connect(host="127.0.0.1", port=args["auth_port"], auth="CUSTOM", username=args["user"],
                          password=args["password"]).cursor()
    order = {"create": nosasl, "insert": nosasl, "merge": nosasl, "update": none, "delete": none}

    def run(sql):
        name = next(n for n, s in statements(args["table"]) if s == sql)
        return _dbapi_run(order.get(name, custom))(sql)

    result = run_scenario(run, args["table"])
    result["description"] = [list(d[:2]) for d in custom.description]
    return result


def impyla(args: dict) -> dict:
    from impala.dbapi import connect

    kwargs = dict(host="127.0.0.1", port=args["port"], auth_mechanism=args.get("auth", "NOSASL"), user=args.get("user", "erin"),
                  password=args.get("password", "x"))
    if args.get("http"):
        kwargs.update(use_http_transport=True, http_path="cliservice")
    cursor = connect(**kwargs).cursor()
    result = run_scenario(_dbapi_run(cursor), args["table"])
    cursor.execute(f"SELECT id FROM {args['table']} ORDER BY id")
    cursor.fetchall()
    result["log"] = cursor.get_log()  # Impala's GetLog RPC
    return result


def sqlalchemy(args: dict) -> dict:
    import pandas as pd
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(f"hive://frank@127.0.0.1:{args['port']}/default")
    table = args["table"]

    def run(sql):
        if sql.lstrip().upper().startswith("SELECT"):
            frame = pd.read_sql(sql, engine)  # probes DESCRIBE <query> first, which must fail
            return list(frame.columns), frame.astype(object).values.tolist()
        with engine.begin() as conn:
            result = conn.execute(text(sql))
            if not result.returns_rows:
                return None, []
            return list(result.keys()), [list(r) for r in result.fetchall()]

    out = run_scenario(run, table)
    inspector = inspect(engine)
    out["reflection"] = {"schemas": inspector.get_schema_names(), "tables": inspector.get_table_names(),
                         "columns": [c["name"] for c in inspector.get_columns(table)],
                         "has_table": inspector.has_table(table), "has_missing": inspector.has_table("no_such_t")}
    return out


# -- the raw protocol (the generated TCLIService client on the thrift runtime) --------------------------------
class Raw:
    """A TCLIService client over a NOSASL binary connection, for the catalog RPCs and protocol corners."""

    def __init__(self, port: int, protocol: int | None = None):
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        from sqlext.server.third_party.tcliservice import TCLIService
        from sqlext.server.third_party.tcliservice import ttypes as t

        self.t = t
        self.transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
        self.transport.open()
        self.client = TCLIService.Client(TBinaryProtocol.TBinaryProtocol(self.transport))
        version = t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10 if protocol is None else protocol
        self.open_resp = self.client.OpenSession(t.TOpenSessionReq(client_protocol=version, username="raw"))
        self.session = self.open_resp.sessionHandle

    def execute(self, sql: str, run_async: bool = False):
        resp = self.client.ExecuteStatement(self.t.TExecuteStatementReq(self.session, sql, runAsync=run_async))
        if resp.status.statusCode not in (0, 1):
            raise RuntimeError(resp.status.errorMessage)
        return resp.operationHandle

    def columns(self, op) -> list[list]:
        md = self.client.GetResultSetMetadata(self.t.TGetResultSetMetadataReq(op))
        out = []
        for desc in md.schema.columns:
            entry = desc.typeDesc.types[0].primitiveEntry
            qualifiers = {k: v.i32Value for k, v in (entry.typeQualifiers.qualifiers.items()
                                                     if entry.typeQualifiers else [])}
            out.append([desc.columnName, self.t.TTypeId._VALUES_TO_NAMES[entry.type], qualifiers])
        return out

    def fetch(self, op, max_rows: int = 1000, orientation: int = 0) -> tuple[list[list], bool]:
        resp = self.client.FetchResults(self.t.TFetchResultsReq(op, orientation, max_rows))
        if resp.status.statusCode not in (0, 1):
            raise RuntimeError(resp.status.errorMessage)
        columns = []
        for col in resp.results.columns or []:
            wrapper = next(getattr(col, f) for f in ("boolVal", "byteVal", "i16Val", "i32Val", "i64Val", "doubleVal",
                                                    "stringVal", "binaryVal") if getattr(col, f) is not None)
            values, nulls = list(wrapper.values), wrapper.nulls or b""
            columns.append([None if i // 8 < len(nulls) and nulls[i // 8] >> (i % 8) & 1 else v
                            for i, v in enumerate(values)])
        rows = [list(r) for r in zip(*columns)]
        return rows, bool(resp.hasMoreRows)

    def fetch_all(self, op) -> list[list]:
        rows = []
        while True:
            batch, _more = self.fetch(op)
            if not batch:
                return rows
            rows += batch

    def result(self, resp) -> dict:
        if resp.status.statusCode not in (0, 1):
            return {"error": resp.status.errorMessage, "sqlstate": resp.status.sqlState}
        op = resp.operationHandle
        out = {"columns": [c[:2] for c in self.columns(op)], "rows": self.fetch_all(op)}
        self.client.CloseOperation(self.t.TCloseOperationReq(op))
        return out


def catalog(args: dict) -> dict:
    """Every catalog RPC for the database `db`, and the result-set metadata and values of `probe` queries."""
    raw, t, db = Raw(args["port"]), None, args["db"]
    t = raw.t
    for sql in args.get("setup", []):
        raw.fetch_all(raw.execute(sql))
    s = raw.session
    out = {
        "catalogs": raw.result(raw.client.GetCatalogs(t.TGetCatalogsReq(s))),
        "schemas": raw.result(raw.client.GetSchemas(t.TGetSchemasReq(s, schemaName=db))),
        "tables": raw.result(raw.client.GetTables(t.TGetTablesReq(s, schemaName=db, tableName="%"))),
        "tables_typed": raw.result(raw.client.GetTables(t.TGetTablesReq(s, schemaName=db, tableTypes=["TABLE"]))),
        "table_types": raw.result(raw.client.GetTableTypes(t.TGetTableTypesReq(s))),
        "columns": raw.result(raw.client.GetColumns(t.TGetColumnsReq(s, schemaName=db, tableName="%"))),
        "columns_pattern": raw.result(raw.client.GetColumns(t.TGetColumnsReq(s, schemaName=db, tableName="%_r_",
                                                                            columnName="_hoodie%"))),
        "type_info": raw.result(raw.client.GetTypeInfo(t.TGetTypeInfoReq(s))),
        "functions": raw.result(raw.client.GetFunctions(t.TGetFunctionsReq(s, schemaName=db, functionName="upper"))),
        "primary_keys": raw.result(raw.client.GetPrimaryKeys(t.TGetPrimaryKeysReq(s, schemaName=db,
                                                                                 tableName=args["pk_table"]))),
    }
    probes = {}
    for name, sql in args.get("probes", {}).items():
        op = raw.execute(sql)
        probes[name] = {"columns": raw.columns(op), "rows": raw.fetch_all(op)}
    out["probes"] = probes
    return out


CLIENTS = {"pyhive": pyhive, "impyla": impyla, "sqlalchemy": sqlalchemy, "catalog": catalog}

if __name__ == "__main__":
    client, arguments = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps(CLIENTS[client](arguments), default=str))
