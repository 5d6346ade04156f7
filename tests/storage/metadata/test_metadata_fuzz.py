"""Fuzzing the metadata table (issue 39: "a corrupted metadata HFile or log block - a clear error or a documented
fallback to listing, never a wrong row count").

Three version 9 tables - a copy-on-write table whose metadata table compacted (HFile base files in every MDT
partition), a merge-on-read table whose MDT is log files only (HFILE_DATA_BLOCKs), and a Java-written fixture -
are damaged, one MDT file at a time, by a seeded random generator: bytes flipped at random offsets, the file cut
at a random length (or at a log block boundary), a range zeroed, and targeted log-block damage (magic, length
fields, header, the INSTANT_TIME header rewritten to another plausible instant, content, footer / reverse
length, the block type), in (a) the files partition's HFiles, (b) its log files, (c) column_stats and partition_stats HFiles and
logs, (d) the MDT's timeline files and its hoodie.properties.

Every damaged copy must either read exactly as the undamaged table (the listing the reader builds - every latest
slice with its files and sizes -, and data skipping keeping at least the slices it keeps on the undamaged table)
or fail with an error naming the damaged file: never another row set. Planning is checked on every case (fast,
no Spark); a seeded subset runs end to end through SQL (`hudi.`path``, with a selective WHERE on a data column,
so data skipping prunes) and the DataFrame reader, and a few cases write after the damage (the write succeeds
and the data reads right, or it fails naming the file and the table reads as before).

The damage the fuzz first found read silently as another state (what no checksum covers: log block headers,
lengths and types, whole blocks cut off, the MDT's hoodie.properties) is pinned by the deterministic tests at the
end; the checks that catch it are listed in storage/metadata/table_metadata.py's module doc.
"""
from __future__ import annotations

import logging
import random
import shutil
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest
from fixture_tables import copy_fixture

from storage.config import HoodieConfig
from storage.metadata.table_metadata import (
    COLUMN_STATS,
    FILES,
    PARTITION_STATS,
    HoodieTableMetadata,
)
from storage.read.predicates import Comparison, Predicate
from storage.read.reader import file_slices_to_read
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

SEED = 39_2026
CASES_PER_TABLE = 120  # planning-level cases (fast)
SPARK_CASES_PER_TABLE = 4  # of those, end to end through SQL and the DataFrame reader (damage to files read)
WRITE_CASES = 1  # per built table: a write after damage to its files partition

COW_V9 = "sample_cow_v9_txns_simple_meta"
SCHEMA = "id int, name string, fare double, ts long, dt string"
MAGIC = b"#HUDI#"
MDT_OFF = {"hoodie.metadata.enable": "false", "hoodie.enable.data.skipping": "false"}


# ----------------------------------------------------------------------------------------------- tables


@dataclass
class Table:
    name: str
    base: Path
    columns: list[str]
    where_sql: str
    where: Predicate
    rows: list[tuple] = field(default_factory=list)
    where_rows: list[tuple] = field(default_factory=list)
    slices: list = field(default_factory=list)
    kept: set = field(default_factory=set)
    live: set[Path] = field(default_factory=set)  # MDT files readers open: latest slices, timeline, properties
    options: dict[str, str] = field(default_factory=dict)

    @property
    def mdt(self) -> Path:
        return self.base / ".hoodie" / "metadata"


def _options(name: str, table_type: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type, "hoodie.write.table.version": "9",
            "hoodie.metadata.enable": "true", "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.metadata.index.partition.stats.enable": "true", "hoodie.parquet.small.file.limit": "0",
            "hoodie.upsert.shuffle.parallelism": "2", "hoodie.insert.shuffle.parallelism": "2", **extra}


def _write(spark, base: Path, opts: dict, rows: list[tuple], operation: str) -> None:
    spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(str(base))


def _build(spark, base: Path, table_type: str, **extra: str) -> Table:
    opts = _options(base.name, table_type, **extra)
    _write(spark, base, opts, [(j, f"a{j}", float(j), 0, f"p{j % 2}") for j in range(10)], "insert")
    _write(spark, base, opts, [(j, f"b{j}", 100.0 + j, 1, f"p{j % 2}") for j in range(10, 20)], "insert")
    _write(spark, base, opts, [(j, f"c{j}", 300.0 + j, 2, f"p{j % 2}") for j in range(0, 20, 3)], "upsert")
    return Table(base.name, base, ["id", "name", "fare", "dt"], "fare >= 300", Comparison("fare", ">=", 300),
                 options=opts)


def _rows(df, columns: list[str]) -> list[tuple]:
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=repr)


def _live_mdt_files(base: Path) -> set[Path]:
    metadata = HoodieTableMetadata(HoodieTableMetaClient.load(str(base)))
    out = set()
    for partition in (FILES, COLUMN_STATS, PARTITION_STATS):
        if partition not in metadata.enabled_partitions:
            continue
        for s in metadata.file_slices(partition):
            out |= {Path(p) for p in ([s.base_file.path] if s.base_file else []) + [lf.path for lf in s.log_files]}
    hoodie = base / ".hoodie" / "metadata" / ".hoodie"  # every completed instant's file is read, and the properties
    return out | {p for p in (hoodie / "timeline").glob("*") if p.is_file() and p.stat().st_size} | \
        {hoodie / "hoodie.properties"}


def _plan(base: Path, predicate: Predicate) -> tuple[list, set]:
    """(every latest slice, the slices data skipping keeps for `predicate`) as the reader plans them."""
    meta = HoodieTableMetaClient.load(str(base))
    every = file_slices_to_read(meta, HoodieConfig())
    kept = file_slices_to_read(HoodieTableMetaClient.load(str(base)), HoodieConfig(), data_filter=predicate)
    return every, {(s.partition_path, s.file_id) for s in kept}


def _settle(spark, table: Table) -> Table:
    df = spark.read.format("hudi").load(str(table.base))
    table.rows = _rows(df, table.columns)
    table.where_rows = _rows(spark.read.format("hudi").options(**MDT_OFF).load(str(table.base))
                             .where(table.where_sql), table.columns)
    assert table.rows and table.where_rows and len(table.where_rows) < len(table.rows)
    table.slices, table.kept = _plan(table.base, table.where)
    table.live = _live_mdt_files(table.base)
    return table


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory, fixtures_cache) -> list[Table]:
    root = tmp_path_factory.mktemp("mdt_fuzz")
    # the COW table's MDT compacts after 2 deltacommits: HFile base files in files, column_stats, partition_stats
    cow = _build(spark, root / "fuzz_cow", "COPY_ON_WRITE", **{"hoodie.metadata.compact.max.delta.commits": "2"})
    mor = _build(spark, root / "fuzz_mor", "MERGE_ON_READ")
    java = copy_fixture(COW_V9, fixtures_cache, root)
    amounts = sorted(r.amount for r in spark.read.format("hudi").load(str(java)).select("amount").collect())
    cut = amounts[len(amounts) * 4 // 5]
    fixture = Table(COW_V9, java, ["txn_id", "account_id", "amount", "currency"], f"amount >= {cut}",
                    Comparison("amount", ">=", Decimal(cut)))
    return [_settle(spark, t) for t in (cow, mor, fixture)]


# ----------------------------------------------------------------------------------------------- damage


@dataclass(frozen=True)
class Damage:
    category: str
    path: Path
    kind: str
    apply: Callable[[bytes], bytes]

    def __str__(self) -> str:
        return f"{self.category}/{self.kind} of {self.path.name}"


def _log_blocks(data: bytes) -> list[dict[str, int]]:
    """Where each block's fields lie (magic, lengths, header, content, footer, reverse length); stops at the
    first thing that does not parse."""
    out, pos = [], 0
    while pos + 22 <= len(data) and data[pos:pos + 6] == MAGIC:
        (length,) = struct.unpack_from(">q", data, pos + 6)
        end = pos + 14 + length
        if end > len(data):
            break
        header = pos + 22
        at = header + 4
        (count,) = struct.unpack_from(">i", data, header)
        instant = None
        for _ in range(count):
            key, size = struct.unpack_from(">ii", data, at)
            if key == 0:  # INSTANT_TIME
                instant = (at + 8, size)
            at += 8 + size
        (content_len,) = struct.unpack_from(">q", data, at)
        content = at + 8
        out.append({"start": pos, "end": end, "header": header, "header_end": at, "content": content,
                    "content_end": content + content_len, "instant": instant})
        pos = end
    return out


def _flip(offsets: list[int], rng: random.Random) -> Callable[[bytes], bytes]:
    masks = [rng.randrange(1, 256) for _ in offsets]

    def apply(data: bytes) -> bytes:
        out = bytearray(data)
        for at, mask in zip(offsets, masks):
            if at < len(out):
                out[at] ^= mask
        return bytes(out)
    return apply


def _damage(category: str, path: Path, rng: random.Random) -> Damage:
    data = path.read_bytes()
    size = len(data)
    kinds = ["flip", "truncate", "zero"]
    blocks = _log_blocks(data) if ".log." in path.name else []
    if blocks:
        kinds += ["magic", "length", "header", "instant", "block_type", "content", "footer", "cut_at_block",
                  "content"]
    if path.name.endswith(".hfile"):
        kinds += ["hfile_block_header", "hfile_trailer"]
    kind = rng.choice(kinds)
    block = rng.choice(blocks) if blocks else None
    if kind == "flip" or size == 0:
        return Damage(category, path, "flip", _flip([rng.randrange(max(size, 1)) for _ in range(rng.randint(1, 3))],
                                                    rng))
    if kind == "truncate":
        keep = rng.randrange(size)
        return Damage(category, path, f"truncate@{keep}", lambda d: d[:keep])
    if kind == "zero":
        at, n = rng.randrange(size), rng.randint(1, 64)
        return Damage(category, path, f"zero@{at}+{n}", lambda d: d[:at] + bytes(len(d[at:at + n])) + d[at + n:])
    if kind == "hfile_block_header":
        return Damage(category, path, kind, _flip([rng.randrange(min(33, size))], rng))
    if kind == "hfile_trailer":
        return Damage(category, path, kind, _flip([size - 1 - rng.randrange(min(200, size))], rng))
    assert block is not None
    if kind == "magic":
        at = block["start"] + rng.randrange(6)
    elif kind == "length":
        at = block["start"] + 6 + rng.randrange(8)
    elif kind == "header":
        at = rng.randrange(block["header"], block["header_end"] + 8)
    elif kind == "footer":
        at = rng.randrange(block["content_end"], block["end"])
    elif kind == "content":
        at = rng.randrange(block["content"], max(block["content_end"], block["content"] + 1))
    elif kind == "block_type":  # another block type, the block still well formed
        at, value = block["start"] + 18, rng.choice([0, 1, 2, 3, 5, 6, 0x7F])
        return Damage(category, path, f"block_type={value}@{at}",
                      lambda d: d[:at] + struct.pack(">i", value) + d[at + 4:])
    elif kind == "cut_at_block":
        keep = block["start"]
        return Damage(category, path, f"cut_at_block@{keep}", lambda d: d[:keep])
    else:  # instant: another plausible instant (one digit changed), the block still well formed
        if block["instant"] is None:
            return Damage(category, path, "flip", _flip([rng.randrange(size)], rng))
        start, length = block["instant"]
        at = start + rng.randrange(length)
        digit = rng.choice([c for c in b"0123456789" if c != data[at]])
        return Damage(category, path, f"instant@{at}", lambda d: d[:at] + bytes([digit]) + d[at + 1:])
    return Damage(category, path, f"{kind}@{at}", _flip([at], rng))


def _targets(table: Table) -> dict[str, list[Path]]:
    mdt = table.mdt

    def files(partition: str) -> list[Path]:
        return sorted(p for p in (mdt / partition).glob("*") if p.is_file() and p.name != ".hoodie_partition_metadata")

    timeline = sorted(p for p in (mdt / ".hoodie" / "timeline").glob("*") if p.is_file() and p.stat().st_size)
    return {"files_hfile": [p for p in files(FILES) if p.suffix == ".hfile"],
            "files_log": [p for p in files(FILES) if ".log." in p.name],
            "column_stats": files(COLUMN_STATS),
            "partition_stats": files(PARTITION_STATS),
            "timeline": timeline,
            "properties": [mdt / ".hoodie" / "hoodie.properties"]}


def _cases(table: Table, rng: random.Random, count: int) -> list[Damage]:
    targets = {c: ps for c, ps in _targets(table).items() if ps}
    out = []
    for _ in range(count):
        category = rng.choice(sorted(targets))
        paths = targets[category]
        live = [p for p in paths if p in table.live]
        path = rng.choice(live if live and rng.random() < 0.75 else paths)
        out.append(_damage(category, path, rng))
    return out


# ----------------------------------------------------------------------------------------------- checks


def _names_file(exc: BaseException, damage: Damage) -> bool:
    text = f"{exc}"
    cause = exc.__cause__ or exc.__context__
    while cause is not None and damage.path.name not in text:
        text += f" {cause}"
        cause = cause.__cause__ or cause.__context__
    return damage.path.name in text


def _planning_problem(table: Table, damage: Damage) -> str | None:
    """None when the damaged table plans as the undamaged one (or fails naming the file); else what is wrong."""
    try:
        every, kept = _plan(table.base, table.where)
    except Exception as exc:  # noqa: BLE001 - any error is acceptable if it is clear
        return None if _names_file(exc, damage) else f"{type(exc).__name__} not naming the file: {exc}"
    if every != table.slices:
        wrong = sorted(set(map(repr, every)) ^ set(map(repr, table.slices)))
        return f"a different listing: {wrong[:4]}"
    if not table.kept <= kept:
        return f"data skipping dropped slices it keeps undamaged: {sorted(table.kept - kept)}"
    return None


def _damaged(table: Table, damage: Damage):
    """Apply `damage` in place; the returned function restores the file."""
    original = damage.path.read_bytes()
    damage.path.write_bytes(damage.apply(original))
    return lambda: damage.path.write_bytes(original)


def _copy_damaged(table: Table, damage: Damage, dest: Path) -> tuple[Table, Damage]:
    base = dest / table.base.name
    shutil.copytree(table.base, base)
    path = base / damage.path.relative_to(table.base)
    path.write_bytes(damage.apply(path.read_bytes()))
    return Table(**{**table.__dict__, "base": base}), Damage(damage.category, path, damage.kind, damage.apply)


def _spark_problem(spark, table: Table, damage: Damage) -> str | None:
    problems = []
    for what, query in (("SQL", lambda: spark.sql(f"SELECT {', '.join(table.columns)} FROM hudi.`{table.base}` "
                                                  f"WHERE {table.where_sql}")),
                        ("DataFrame", lambda: spark.read.format("hudi").load(str(table.base)))):
        expected = table.where_rows if what == "SQL" else table.rows
        try:
            rows = _rows(query(), table.columns)
        except Exception as exc:  # noqa: BLE001
            if not _names_file(exc, damage):
                problems.append(f"{what}: {type(exc).__name__} not naming the file: {str(exc)[:300]}")
            continue
        if rows != expected:
            problems.append(f"{what}: {len(rows)} rows instead of {len(expected)} "
                            f"(missing {sorted(set(expected) - set(rows))[:3]}, extra {sorted(set(rows) - set(expected))[:3]})")
    return "; ".join(problems) or None


def _write_problem(spark, table: Table, damage: Damage) -> str | None:
    update = [(j, f"w{j}", 500.0 + j, 9, f"p{j % 2}") for j in (1, 4, 25)]
    try:
        _write(spark, table.base, table.options, update, "upsert")
    except Exception as exc:  # noqa: BLE001
        after = _rows(spark.read.format("hudi").load(str(table.base)), table.columns)
        if after != table.rows:
            return f"the write failed ({exc}) and the table no longer reads as before"
        return None if _names_file(exc, damage) else f"write: {type(exc).__name__} not naming the file: {exc}"
    by_id = {r[0]: r for r in table.rows}
    by_id.update({r[0]: (r[0], r[1], r[2], r[4]) for r in update})
    expected = sorted(by_id.values(), key=repr)
    for options in ({}, MDT_OFF):
        rows = _rows(spark.read.format("hudi").options(**options).load(str(table.base)), table.columns)
        if rows != expected:
            return f"after the write ({options or 'through the MDT'}): {len(rows)} rows, expected {len(expected)}: " \
                   f"missing {sorted(set(expected) - set(rows))[:3]}, extra {sorted(set(rows) - set(expected))[:3]}"
    return None


# ----------------------------------------------------------------------------------------------- the test


def test_a_damaged_metadata_table_never_gives_other_rows(spark, tables, tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="storage")  # the fallbacks warn on every case
    started = time.monotonic()
    rng = random.Random(SEED)
    failures: list[str] = []
    covered: dict[str, int] = {}
    for table in tables:
        cases = _cases(table, rng, CASES_PER_TABLE)
        for damage in cases:
            covered[f"{damage.category}/{damage.kind.split('@')[0]}"] = \
                covered.get(f"{damage.category}/{damage.kind.split('@')[0]}", 0) + 1
            restore = _damaged(table, damage)
            try:
                problem = _planning_problem(table, damage)
            finally:
                restore()
            if problem:
                failures.append(f"{table.name}: {damage}: {problem}")
        assert _plan(table.base, table.where)[0] == table.slices  # restored
        log.info("%s: %d planning cases after %.1f s", table.name, len(cases), time.monotonic() - started)
        read = [d for d in cases if d.path in table.live]
        for i, damage in enumerate(rng.sample(read, SPARK_CASES_PER_TABLE)):
            copy, moved = _copy_damaged(table, damage, tmp_path / f"{table.name}_spark{i}")
            problem = _spark_problem(spark, copy, moved)
            if problem:
                failures.append(f"{table.name} (Spark): {damage}: {problem}")
        if table.options:  # the built tables: a write after the damage
            files_damage = [d for d in read if d.category.startswith("files")]
            for i, damage in enumerate(rng.sample(files_damage, WRITE_CASES)):
                copy, moved = _copy_damaged(table, damage, tmp_path / f"{table.name}_write{i}")
                problem = _write_problem(spark, copy, moved)
                if problem:
                    failures.append(f"{table.name} (write): {damage}: {problem}")
        log.info("%s: Spark and write cases done after %.1f s", table.name, time.monotonic() - started)
    log.info("fuzz cases by damage: %s", covered)
    assert not failures, f"{len(failures)} damaged copies misbehaved:\n" + "\n".join(failures)


# ----------------------------------------------------------------------------------------------- the damage fixed


def _latest_log(base: Path, partition: str) -> Path:
    """The newest log file of MDT partition `partition` that a reader of the Java fixture opens."""
    live = _live_mdt_files(base)
    return max((p for p in live if p.parent.name == partition and ".log." in p.name and p.stat().st_size > 100),
               key=lambda p: p.name)


def _rename_in_schema(data: bytes, block: dict[str, int]) -> bytes:
    """The block's SCHEMA header with a field renamed (same length): still valid JSON, another record shape."""
    at = data.index(b'"maxValue"', block["header"], block["header_end"])
    return data[:at] + b'"maxVblue"' + data[at + 10:]


WELL_FORMED_DAMAGE = {
    # each leaves a structurally valid log file; before the reader's cross-checks they were read silently
    "cut at a block boundary": (FILES, lambda d, b: d[:b["start"]]),
    "INSTANT_TIME rewritten": (FILES, lambda d, b: d[:b["instant"][0]] + b"1999" + d[b["instant"][0] + 4:]),
    "block type AVRO_DATA_BLOCK": (FILES, lambda d, b: d[:b["start"] + 18] + struct.pack(">i", 3) + d[b["start"] + 22:]),
    "SCHEMA header renames a field": (PARTITION_STATS, _rename_in_schema),
}


@pytest.mark.parametrize("damage", sorted(WELL_FORMED_DAMAGE))
def test_well_formed_damage_to_a_log_block_is_not_read_as_records(fixtures_cache, tmp_path, caplog, damage):
    """A log block damaged into another well-formed one (no checksum covers a log block's header or length) must
    not be skipped or decoded as something else: within the bytes a completed commit wrote, the reader fails
    naming the file, and the listing (or data skipping) falls back with a warning naming it."""
    base = copy_fixture(COW_V9, fixtures_cache, tmp_path)
    predicate = Comparison("amount", ">=", Decimal(100))
    expected = _plan(base, predicate)
    partition, apply = WELL_FORMED_DAMAGE[damage]
    path = _latest_log(base, partition)
    data = path.read_bytes()
    path.write_bytes(apply(data, _log_blocks(data)[0]))
    caplog.set_level(logging.WARNING, logger="storage")
    every, kept = _plan(base, predicate)
    assert every == expected[0] and expected[1] <= kept
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(path.name in w and ("listing storage instead" in w or "data skipping is off" in w) for w in warnings), \
        warnings


PROPERTIES_DAMAGE = {
    # hoodie.table.checksum covers the table name only: these parse, and used to be read as they say
    "layout key renamed": (b"hoodie.timeline.layout.version=", b"ioodie.timeline.layout.version="),
    "timeline path renamed": (b"hoodie.timeline.path=timeline", b"hoodie.timeline.path=timelind"),
    "table type": (b"hoodie.table.type=MERGE_ON_READ", b"hoodie.table.type=COPY_ON_WRITE"),
    "not a number": (b"hoodie.timeline.layout.version=2", b"hoodie.timeline.layout.version=\x00"),
}


@pytest.mark.parametrize("damage", sorted(PROPERTIES_DAMAGE))
def test_well_formed_damage_to_the_metadata_tables_properties_falls_back(fixtures_cache, tmp_path, caplog, damage):
    base = copy_fixture(COW_V9, fixtures_cache, tmp_path)
    predicate = Comparison("amount", ">=", Decimal(100))
    expected = _plan(base, predicate)
    path = base / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties"
    old, new = PROPERTIES_DAMAGE[damage]
    assert old in path.read_bytes()
    path.write_bytes(path.read_bytes().replace(old, new))
    caplog.set_level(logging.WARNING, logger="storage")
    every, kept = _plan(base, predicate)
    assert every == expected[0] and expected[1] <= kept
    warnings = [r.getMessage() for r in caplog.records if r.name == "storage.table.fs_view"]
    assert any(str(path) in w and "listing storage instead" in w for w in warnings), warnings
