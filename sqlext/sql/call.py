"""CALL [system.]name(arg => value, ...) | CALL name(value, ...): run a registered procedure.

sqlglot keeps CALL as an opaque Command, so the argument list is tokenized here (sqlglot's Spark tokenizer)
to keep each argument's position for errors. Argument values are constant expressions: literals are taken
as they are, anything else (e.g. `map('a', 'b')`, `1 + 1`) is evaluated by Spark. Named and positional
arguments mix as in Hudi (positional first); each value is checked against the parameter's declared type.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from pyspark.sql import DataFrame
from sqlglot import exp
from sqlglot.tokens import TokenType

from sqlext.sql.procedures import registry
from sqlext.sql.resolver import HudiTableRef, TableName

log = logging.getLogger(__name__)

_CALL = re.compile(r"(?is)^\s*CALL\b")
_NAMESPACES = ("system", "hudi", "spark_catalog.system")
_PATH_FORM = re.compile(r"(?i)^hudi\.`(.+)`$")


@dataclass
class Argument:
    name: str | None           # None for positional
    text: str                  # the value's SQL text
    offset: int                # where the argument starts in the statement text


@dataclass
class ParsedCall:
    name: str
    name_offset: int
    arguments: list[Argument] = field(default_factory=list)


def matches(ctx, text: str) -> bool:
    return bool(_CALL.match(text))


def plan(ctx, text: str) -> DataFrame:
    parsed = parse_call(ctx, text)
    proc = registry.get(parsed.name)
    if proc is None:
        known = ", ".join(registry.names())
        raise _error(ctx, text, parsed.name_offset, f"unknown procedure '{parsed.name}' (known: {known})")
    args = bind_arguments(ctx, text, proc, parsed)
    call = ProcedureCall(ctx, proc, text)
    log.info("CALL %s(%s)", proc.name, ", ".join(f"{k} => {v!r}" for k, v in args.items() if v is not None))
    result = proc.run(call, args)
    return call.to_frame(result)


# -- parsing -----------------------------------------------------------------------------------------
def parse_call(ctx, text: str) -> ParsedCall:
    head = _CALL.match(text)
    body_start = head.end()
    tokens = sqlglot.Dialect.get_or_raise("spark").tokenize(text[body_start:])
    pos = 0

    def at(i):
        return tokens[i] if i < len(tokens) else None

    name_parts, name_offset = [], None
    while at(pos) is not None and at(pos).token_type not in (TokenType.L_PAREN,):
        tok = at(pos)
        if tok.token_type != TokenType.DOT:
            name_parts.append(tok.text)
            name_offset = body_start + tok.start if name_offset is None else name_offset
        pos += 1
    if not name_parts:
        raise _error(ctx, text, body_start, "CALL needs a procedure name, e.g. CALL show_commits(table => 't')")
    if at(pos) is None:
        raise _error(ctx, text, body_start + tokens[-1].end + 1,
                     f"CALL {'.'.join(name_parts)}: expected '(' and an argument list")
    qualified = ".".join(name_parts).lower()
    name = name_parts[-1].lower()
    namespace = qualified[: -len(name) - 1] if len(name_parts) > 1 else ""
    if namespace and namespace not in _NAMESPACES:
        raise _error(ctx, text, name_offset, f"unknown procedure namespace '{namespace}' (use system.{name} or {name})")
    parsed = ParsedCall(name, name_offset)
    pos += 1  # (
    depth, current, _start_tok = 0, [], None
    while True:
        tok = at(pos)
        if tok is None:
            raise _error(ctx, text, len(text.rstrip()), f"CALL {name}: missing ')'")
        if depth == 0 and tok.token_type in (TokenType.COMMA, TokenType.R_PAREN):
            if current:
                parsed.arguments.append(_argument(ctx, text, body_start, current))
            elif tok.token_type == TokenType.COMMA or parsed.arguments:
                raise _error(ctx, text, body_start + tok.start, f"CALL {name}: empty argument")
            current = []
            pos += 1
            if tok.token_type == TokenType.R_PAREN:
                break
            continue
        if tok.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif tok.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        current.append(tok)
        pos += 1
    rest = [t for t in tokens[pos:] if t.token_type != TokenType.SEMICOLON]
    if rest:
        raise _error(ctx, text, body_start + rest[0].start, f"CALL {name}: unexpected '{rest[0].text}' after ')'")
    return parsed


def _argument(ctx, text: str, base: int, tokens: list) -> Argument:
    if len(tokens) >= 2 and tokens[1].token_type == TokenType.FARROW:
        if len(tokens) == 2:
            raise _error(ctx, text, base + tokens[1].end + 1, f"argument '{tokens[0].text}' has no value")
        first = tokens[2]
        return Argument(tokens[0].text.strip("`").lower(), text[base + first.start: base + tokens[-1].end + 1],
                        base + tokens[0].start)
    return Argument(None, text[base + tokens[0].start: base + tokens[-1].end + 1], base + tokens[0].start)


# -- binding -----------------------------------------------------------------------------------------
def bind_arguments(ctx, text: str, proc: registry.Procedure, parsed: ParsedCall) -> dict[str, Any]:
    """Parameter name -> value (defaults filled in); errors name the argument and its position."""
    values: dict[str, Any] = {}
    given: dict[str, Argument] = {}
    seen_named = False
    for i, arg in enumerate(parsed.arguments):
        if arg.name is None:
            if seen_named:
                raise _error(ctx, text, arg.offset, f"CALL {proc.name}: a positional argument cannot follow "
                                                    "named arguments")
            if i >= len(proc.parameters):
                raise _error(ctx, text, arg.offset, f"CALL {proc.name}: too many arguments ({len(parsed.arguments)}; "
                                                    f"it takes {len(proc.parameters)})\n{proc.usage()}")
            param = proc.parameters[i]
        else:
            seen_named = True
            param = proc.parameter(arg.name)
            if param is None:
                raise _error(ctx, text, arg.offset, f"CALL {proc.name}: unknown argument '{arg.name}' (parameters: "
                                                    f"{', '.join(p.name for p in proc.parameters) or 'none'})")
        if param.name in given:
            raise _error(ctx, text, arg.offset, f"CALL {proc.name}: argument '{param.name}' is given twice")
        given[param.name] = arg
        values[param.name] = _coerce(ctx, text, proc, param, arg, _evaluate(ctx, text, arg))
    for param in proc.parameters:
        if param.name not in values:
            if param.required:
                raise _error(ctx, text, parsed.name_offset,
                             f"CALL {proc.name}: missing required argument '{param.name}' ({param.type})")
            values[param.name] = param.default
    return values


def _evaluate(ctx, text: str, arg: Argument) -> Any:
    try:
        node = sqlglot.parse_one(arg.text, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise _error(ctx, text, arg.offset, f"invalid argument value '{arg.text}': {exc}") from exc
    literal = _literal(node)
    if literal is not _NOT_LITERAL:
        return literal
    if any(True for _ in node.find_all(exp.Column, exp.Table)):
        raise _error(ctx, text, arg.offset, f"argument value '{arg.text}' must be a constant (quote names: "
                                            f"'{arg.text}')")
    try:
        return ctx.run_sql(f"SELECT {node.sql(dialect='spark')} AS v").collect()[0][0]
    except Exception as exc:
        from sqlext.sql.assign import spark_message

        raise _error(ctx, text, arg.offset, f"cannot evaluate argument value '{arg.text}': {spark_message(exc)}") from exc


_NOT_LITERAL = object()


def _literal(node: exp.Expression) -> Any:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        number = node.this
        return float(number) if any(c in number for c in ".eE") else int(number)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = _literal(node.this)
        return -value
    return _NOT_LITERAL


_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}


def _coerce(ctx, text: str, proc, param: registry.ProcedureParameter, arg: Argument, value: Any) -> Any:
    if value is None:
        if param.required:
            raise _error(ctx, text, arg.offset, f"CALL {proc.name}: argument '{param.name}' cannot be NULL")
        return None
    kind = param.type.lower()

    def bad():
        return _error(ctx, text, arg.offset, f"CALL {proc.name}: argument '{param.name}' must be {param.type}, "
                                             f"got {value!r}")
    if kind == "string":
        if isinstance(value, (dict, list, tuple)):
            raise bad()
        return value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    if kind in ("int", "integer", "long", "bigint"):
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            return int(value)
        raise bad()
    if kind in ("double", "float"):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise bad() from None
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise bad()
    if kind.startswith("map"):
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        raise bad()
    return value


def _error(ctx, text: str, offset: int, message: str):
    from sqlext.sql.errors import HoodieSqlError

    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    abs_line, abs_col = ctx.statement.position.absolute(line, col)
    return HoodieSqlError(message, line=abs_line, col=abs_col, statement=ctx.statement.text)


# -- what a procedure sees ---------------------------------------------------------------------------
class ProcedureCall:
    """The running CALL: the session, table lookup (`table` name or `path`), errors, result frames."""

    def __init__(self, ctx, proc: registry.Procedure, text: str):
        self.ctx = ctx
        self.proc = proc
        self.text = text

    @property
    def spark(self):
        return self.ctx.spark

    @property
    def resolver(self):
        return self.ctx.resolver

    def error(self, message: str) -> Exception:
        from sqlext.sql.errors import HoodieSqlError

        pos = self.ctx.statement.position
        return HoodieSqlError(f"CALL {self.proc.name}: {message}", line=pos.line, col=pos.col,
                            statement=self.ctx.statement.text)

    def table_ref(self, table: str | None = None, path: str | None = None) -> HudiTableRef:
        """The Hudi table named by a `table` argument ('db.t', 't' or a path) or a `path` argument."""
        from sqlext.sql.resolver import is_hudi_table
        from storage.io.storage_location import normalize_base_path

        if table:
            quoted = _PATH_FORM.match(table.strip())  # hudi.`/abs/path`, as in SQL
            name = TableName.parse(quoted.group(1) if quoted else table)
            ref = self.resolver.resolve(name)
            if ref is None:
                raise self.error(f"table '{table}' does not exist or is not a Hudi table")
            return ref
        if path:
            base = normalize_base_path(path)
            if not is_hudi_table(base):
                raise self.error(f"path '{path}' is not a Hudi table (no .hoodie/hoodie.properties)")
            return HudiTableRef(name=base.rstrip("/").rsplit("/", 1)[-1], db=None, path=base)
        names = [p.name for p in self.proc.parameters if p.name in ("table", "path")]
        raise self.error(f"give the table: {' or '.join(f'{n} => ...' for n in names) or 'table => ...'}")

    def meta_client(self, args: dict[str, Any]):
        from storage.table.meta_client import HoodieTableMetaClient

        ref = self.table_ref(args.get("table"), args.get("path"))
        return HoodieTableMetaClient.load(ref.path)

    def run(self, fn, *args, **kwargs):
        """`fn(*args, **kwargs)`; a storage error becomes the CALL's error (position, statement), the table
        unchanged."""
        from storage.exception import HoodieError

        try:
            return fn(*args, **kwargs)
        except HoodieError as exc:
            raise self.error(str(exc)) from exc

    def writer_config(self, meta):
        """What a procedure that changes the table runs with: the table's properties and the session's
        `SET hoodie.*` (so a session with `hoodie.metadata.enable=true` keeps the metadata table in step, or
        builds the indexes it enables)."""
        from sqlext.sql.table import session_hoodie_conf
        from storage.config import HoodieConfig

        return meta.table_config.with_options(HoodieConfig.of(session_hoodie_conf(self.spark)))

    def to_frame(self, result) -> DataFrame:
        if isinstance(result, DataFrame):
            return result
        rows = [tuple(r) for r in (result or [])]
        return self.spark.createDataFrame(rows, self.proc.output)

    def filtered(self, frame: DataFrame, expression: str | None) -> DataFrame:
        """Hudi's `filter` argument: a SQL predicate over the output columns."""
        if not expression or not expression.strip():
            return frame
        try:
            from pyspark.sql import functions as F

            return frame.where(F.expr(expression))
        except Exception as exc:
            from sqlext.sql.assign import spark_message

            raise self.error(f"invalid filter '{expression}': {spark_message(exc)}") from exc
