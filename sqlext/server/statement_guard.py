"""The safe default of served sessions: what a client with a valid password may not do through SQL.

An authenticated client runs its statements in the server's process, with the server's file system, environment
and credentials. Unless the server was started with `--allow-unsafe-statements` (an administrator's choice),
a statement is refused (SQLSTATE 42000, naming what and why) when it would:
- read or write files by path outside the data roots (the warehouse and `--data-root` directories): Spark's
  `format.\\`path\\`` relations (text, csv, json, parquet, ...), `hudi.\\`path\\``, `LOCATION` / `OPTIONS (path ...)`
  of CREATE, `LOAD DATA INPATH`; the server's own state (`<warehouse>/.sqlext`) and its users file are never
  readable, inside the roots or not;
- write query results to a directory (`INSERT OVERWRITE [LOCAL] DIRECTORY`);
- reach the JVM: `reflect`, `java_method`, `try_reflect`, `ADD JAR|FILE|ARCHIVE`, `CREATE FUNCTION ... AS
  'class'` (a Java UDF; SQL functions with RETURN stay allowed);
- change where credentials, endpoints, catalogs or the warehouse come from: `SET` (or a session's `set:hiveconf:`
  configuration) of `spark.hadoop.*`, `hadoop.*`, `fs.*`, `hive.metastore.*`, `spark.sql.catalog.*`, the
  warehouse, `spark.sql.runSQLOnFiles`, or any key naming a secret, token, password, credential, access key or
  endpoint (`hoodie.aws.secret.key`, `hoodie.write.lock.dynamodb.endpoint_url`, ...).

The checks are patterns over the statement's text (comments removed), not a parse: a statement Spark understands
but no other parser does is checked all the same, and a forbidden form inside a string literal is refused too
(the error says what matched).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from sqlext.server.errors import HoodieServerError
from sqlext.server.statement_text import without_comments

FILE_FORMATS = ("text", "csv", "json", "parquet", "orc", "avro", "binaryfile", "hudi", "delta", "image", "libsvm",
                "xml", "jdbc")
REFLECTION_FUNCTIONS = ("reflect", "java_method", "try_reflect")
_SETTING_PREFIXES = ("spark.hadoop.", "hadoop.", "fs.", "hive.metastore.", "spark.sql.catalog.", "spark.jars",
                     "spark.sql.warehouse.dir", "spark.sql.runsqlonfiles", "hive.metastore.warehouse.dir",
                     "javax.jdo.", "datanucleus.")
_SETTING_WORDS = ("secret", "token", "password", "credential", "access.key", "accesskey", "endpoint", "keytab",
                  "principal")

_QUOTED = r"(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\")"
_PATH_RELATION = re.compile(r"\b(" + "|".join(FILE_FORMATS) + r")\s*\.\s*`((?:[^`]|``)+)`", re.IGNORECASE)
_LOCATION = re.compile(r"\b(LOCATION|INPATH)\s+" + _QUOTED, re.IGNORECASE)
_PATH_OPTION = re.compile(r"[(,]\s*[`'\"]?path[`'\"]?\s*=?\s*" + _QUOTED, re.IGNORECASE)
_REFLECTION = re.compile(r"`?\b(" + "|".join(REFLECTION_FUNCTIONS) + r")\b`?\s*\(", re.IGNORECASE)
_ADD_RESOURCE = re.compile(r"^\s*ADD\s+(JARS?|FILES?|ARCHIVES?)\b", re.IGNORECASE)
_JAVA_FUNCTION = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?FUNCTION\b(?:(?!\bRETURNS?\b).)*?"
                            r"\bAS\s*" + _QUOTED, re.IGNORECASE | re.DOTALL)
_DIRECTORY = re.compile(r"\bINSERT\s+OVERWRITE\s+(?:LOCAL\s+)?DIRECTORY\b", re.IGNORECASE)
_SET = re.compile(r"^\s*SET\s+(?:-v\s+)?`?([^=\s`]+)`?\s*(=|$)", re.IGNORECASE)


class HoodieAccessDeniedError(HoodieServerError):
    """A statement or setting the server's policy does not allow this session."""

    sqlstate = "42000"  # syntax error or access rule violation


@dataclass(frozen=True)
class StatementGuard:
    """`roots`: directories paths may name (absolute, normalised); `private`: files and directories never
    readable (the users file, the server registry)."""

    roots: tuple[str, ...]
    private: tuple[str, ...] = ()

    @classmethod
    def for_server(cls, warehouse: str, data_roots: tuple[str, ...] = (), users_file: str | None = None
                   ) -> "StatementGuard":
        roots = tuple(_normal(r) for r in (warehouse, *data_roots) if r)
        private = tuple(_normal(p) for p in (users_file, os.path.join(_strip_scheme(warehouse), ".sqlext")) if p)
        return cls(roots, private)

    # -- checks --------------------------------------------------------------------------------------
    def check_statement(self, statement: str) -> None:
        """Raise HoodieAccessDeniedError when `statement` does something the safe default refuses."""
        text = without_comments(statement)
        if _ADD_RESOURCE.search(text):
            self._deny("ADD JAR / FILE / ARCHIVE loads code or files into the server", statement)
        if _JAVA_FUNCTION.search(text):
            self._deny("CREATE FUNCTION ... AS '<class>' runs a Java class in the server (SQL functions with "
                       "RETURNS are allowed)", statement)
        if _DIRECTORY.search(text):
            self._deny("INSERT OVERWRITE DIRECTORY writes files outside any table", statement)
        found = _REFLECTION.search(text)
        if found:
            self._deny(f"{found.group(1).lower()}() calls Java methods in the server", statement)
        setting = _SET.match(text)
        if setting and setting.group(2) == "=":
            self.check_setting(setting.group(1), statement)
        for match in _PATH_RELATION.finditer(text):
            self._check_path(match.group(2).replace("``", "`"), f"{match.group(1)}.`...`", statement)
        for match in _LOCATION.finditer(text):
            self._check_path(match.group(2) if match.group(2) is not None else match.group(3),
                             match.group(1).upper(), statement)
        for match in _PATH_OPTION.finditer(text):
            self._check_path(match.group(1) if match.group(1) is not None else match.group(2), "OPTIONS (path)",
                             statement)

    def check_setting(self, key: str, statement: str | None = None) -> None:
        lower = key.strip().lower()
        if lower.startswith(_SETTING_PREFIXES) or any(word in lower for word in _SETTING_WORDS):
            self._deny(f"setting {key} changes credentials, endpoints, catalogs or file locations of the server",
                       statement or f"SET {key}")

    def _check_path(self, path: str, form: str, statement: str) -> None:
        normal = _normal(path)
        if any(_within(normal, p) for p in self.private):
            self._deny(f"{form} {path!r} names the server's own state", statement)
        if not any(_within(normal, root) for root in self.roots):
            self._deny(f"{form} {path!r} is outside the data roots ({', '.join(self.roots) or 'none'})", statement)

    @staticmethod
    def _deny(why: str, statement: str) -> None:
        raise HoodieAccessDeniedError(f"refused by the server's safe default: {why}; statement: "
                                      f"{' '.join(statement.split())[:200]} (an administrator may start the server "
                                      "with --allow-unsafe-statements or add --data-root DIR)")


def _strip_scheme(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


def _normal(path: str) -> str:
    """Local paths resolved (symlinks and `..` included); other schemes as written, without a trailing slash."""
    path = _strip_scheme(path.strip())
    if "://" in path:
        return path.rstrip("/")
    return os.path.realpath(path)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
