"""storage.engine.spark_hash against Spark itself: F.xxhash64 and the uniform position expression."""
from __future__ import annotations

import random
import string

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from storage.engine.spark_hash import uniform_position, xxhash64_strings

MULTI_BYTE = ["é", "中文", "😀", "a😀b", "naïve café ", "日本語のテキスト" * 3, "😀" * 9, "ü" * 17, "a\x00b", "Ωmega" * 8]


def _values() -> list[str | None]:
    rnd = random.Random(7)
    ascii_ = [''.join(rnd.choices(string.printable, k=n)) for n in range(71) for _ in range(2)]
    ascii_ += [''.join(rnd.choices(string.ascii_letters, k=rnd.randint(0, 100))) for _ in range(60)]
    alphabet = "aZ9 éü中文日😀Ω"
    unicode_ = [''.join(rnd.choices(alphabet, k=rnd.randint(0, 40))) for _ in range(60)]
    values = ascii_ + MULTI_BYTE + unicode_ + ["", None, None, ""]
    rnd.shuffle(values)
    return values


def _on_spark(spark, values: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    df = spark.createDataFrame(list(enumerate(values)), "i long, k string")
    h = F.xxhash64(F.col("k"))
    position = h.bitwiseAND(F.lit(0x7FFFFFFFFFFFFFFF)) / F.lit(float(2 ** 63))
    rows = df.select("i", h.alias("h"), position.alias("p")).orderBy("i").collect()
    return np.array([r.h for r in rows], dtype=np.int64), np.array([r.p for r in rows], dtype=np.float64)


@pytest.fixture(scope="module")
def expected(spark):
    values = _values()
    return values, *_on_spark(spark, values)


def _check(arrow_values, hashes: np.ndarray, positions: np.ndarray) -> None:
    got = xxhash64_strings(arrow_values)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, hashes)
    got_positions = uniform_position(arrow_values)
    assert got_positions.dtype == np.float64
    np.testing.assert_array_equal(got_positions, positions)


def test_spark_returns_the_seed_for_null(expected):
    values, hashes, _ = expected
    assert {int(h) for v, h in zip(values, hashes) if v is None} == {42}


def test_every_length_is_covered(expected):
    lengths = {len(v.encode()) for v in expected[0] if v is not None}
    assert set(range(71)) <= lengths and max(lengths) >= 96


def test_string_array(expected):
    values, hashes, positions = expected
    _check(pa.array(values, pa.string()), hashes, positions)


def test_large_string_array(expected):
    values, hashes, positions = expected
    _check(pa.array(values, pa.large_string()), hashes, positions)


@pytest.mark.parametrize("type_", [pa.string(), pa.large_string()])
def test_sliced_array(expected, type_):
    values, hashes, positions = expected
    sliced = pa.array(values, type_).slice(13, 150)
    assert sliced.offset == 13
    _check(sliced, hashes[13:163], positions[13:163])


def test_chunked_array(expected):
    values, hashes, positions = expected
    base = pa.array(values)
    chunked = pa.chunked_array([base.slice(0, 5), base.slice(5, 0), base.slice(5, 100), base.slice(105)])
    _check(chunked, hashes, positions)
    _check(pa.chunked_array([], pa.string()), hashes[:0], positions[:0])


def test_empty_string_and_nulls_only(expected):
    values, hashes, positions = expected
    picks = [i for i, v in enumerate(values) if v is None or v == ""]
    _check(pa.array([values[i] for i in picks]), hashes[picks], positions[picks])
    _check(pa.array([None, None], pa.string()), np.array([42, 42]), positions[[values.index(None)] * 2])


def test_equal_strings_hash_equal():
    rnd = random.Random(3)
    keys = [''.join(rnd.choices(string.ascii_letters + "é😀", k=rnd.randint(0, 70))) for _ in range(300)]
    once = xxhash64_strings(pa.array(keys))
    shuffled = list(range(len(keys))) * 2
    rnd.shuffle(shuffled)
    repeated = [keys[i] for i in shuffled]
    np.testing.assert_array_equal(xxhash64_strings(pa.array(repeated, pa.large_string())), once[shuffled])
    chunked = pa.chunked_array([pa.array(repeated[:250]), pa.array(repeated[250:])])
    np.testing.assert_array_equal(xxhash64_strings(chunked), once[shuffled])
    assert len(set(once.tolist())) == len(set(keys))


def test_rejects_other_types():
    with pytest.raises(TypeError):
        xxhash64_strings(pa.array([1, 2]))
