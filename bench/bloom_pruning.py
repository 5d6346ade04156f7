"""python -m bench.bloom_pruning [--rows R] [--batch B] — issue 46: the bloom index's per-file step on a table whose
footers are hashed as Java Hudi hashes them, before and after this engine hashed the same way.

The table is W1 (written by this engine) with its footers' order marker removed: Hudi-order filters with nothing
naming the order, as in a Java-written table. The W2 batch's keys are paired with the files as the bloom index
pairs them (same partition, inside the file's min/max key range), then each file's step runs in-process:
- before: the filter probed in Hadoop's order (the only one this engine had), behind the min/max trust check,
  which rejects most such footers so that their candidates all go to the exact check (a read of the key column);
- after: `storage.index.key_lookup` as it is now, the footer presented with Java's `created_by` (as a
  parquet-mr-written file's), and once more as it is on disk (Arrow-written, naming no order: its min/max keys
  decide, or its keys are checked exactly).
Reports files exactly checked, keys exactly checked, matches found and the step's time. Writes
bench/results/bloom-pruning-<time>.json."""
from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.workloads import DataSet

log = logging.getLogger("bench.bloom_pruning")


def _strip_order_marker(path: str) -> None:
    """The file as Java would have written its footer: the same Hudi-order filter, no order marker."""
    from storage.bloom.footer import BLOOM_FILTER_TAIL_ORDER_KEY

    source = pq.ParquetFile(path)
    meta = {k: v for k, v in (source.metadata.metadata or {}).items()
            if k not in (BLOOM_FILTER_TAIL_ORDER_KEY.encode(), b"ARROW:schema")}
    table = source.read().replace_schema_metadata(None)
    with pq.ParquetWriter(path + ".tmp", table.schema, compression="snappy") as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(meta)
    os.replace(path + ".tmp", path)


def _before(metadata: pq.FileMetaData):
    """The footer filter as this engine used it before issue 46: Hadoop order, trusted only if it holds the
    footer's own min/max keys."""
    from storage.bloom import BLOOM_FILTER_FOOTER_KEY, BLOOM_FILTER_TYPE_CODE_KEY, TailOrder
    from storage.bloom.bloom_filter import deserialize_bloom_filter
    from storage.bloom.footer import footer_own_keys

    meta = metadata.metadata
    bloom = deserialize_bloom_filter(meta.get(BLOOM_FILTER_TYPE_CODE_KEY.encode()),
                                     meta[BLOOM_FILTER_FOOTER_KEY.encode()], TailOrder.HADOOP)
    own = footer_own_keys(metadata)
    return bloom if bloom.might_contain_many(own).all() else None


class _AsJavaWrote:
    """A footer as a parquet-mr-written file presents it (Java Hudi's writer): same entries, Java's `created_by`."""

    def __init__(self, metadata: pq.FileMetaData):
        self.metadata = metadata.metadata
        self.created_by = "parquet-mr version 1.13.1 (build db4183109d5b734ec5930d870cdae161e408ddba)"


def _step(files: list[tuple[str, pa.Array]], choose) -> dict:
    from storage.index.key_lookup import exact_matches

    checked_files = checked_keys = found = 0
    started = time.perf_counter()
    for path, candidates in files:
        parquet = pq.ParquetFile(path)
        bloom = choose(parquet.metadata, path)
        keys = candidates if bloom is None else candidates.filter(pa.array(bloom.might_contain_many(candidates)))
        if len(keys):
            checked_files += 1
            checked_keys += len(keys)
            found += len(exact_matches(parquet, keys))
    return {"files_exactly_checked": checked_files, "keys_exactly_checked": checked_keys, "keys_found": found,
            "seconds": round(time.perf_counter() - started, 3)}


def _pairs(base_path: str, batch: pa.Table) -> list[tuple[str, pa.Array]]:
    """(file, candidate keys) as the bloom index pairs them: the file's partition, inside its key range."""
    from storage.bloom.footer import footer_key_range

    keys = pc.cast(batch["id"], pa.string())
    pairs = []
    for root, _, names in os.walk(base_path):
        if ".hoodie" in root:
            continue
        partition = os.path.relpath(root, base_path)
        for name in sorted(n for n in names if n.endswith(".parquet")):
            path = os.path.join(root, name)
            low, high = footer_key_range(pq.read_metadata(path))
            mask = pc.and_(pc.equal(batch["dt"], partition),
                           pc.and_(pc.greater_equal(keys, low), pc.less_equal(keys, high)))
            pairs.append((path, keys.filter(mask)))
    return pairs


def run(spark, path: str, data: DataSet) -> dict:
    from storage.index.key_lookup import trusted_bloom_filter

    opts = {"hoodie.table.name": "bloom_pruning", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.operation": "bulk_insert", "hoodie.datasource.write.hive_style_partitioning": "false"}
    spark.createDataFrame(data.base().to_pandas()).write.format("hudi").options(**opts).mode("overwrite").save(path)
    files = [os.path.join(r, n) for r, _, ns in os.walk(path) if ".hoodie" not in r for n in ns if n.endswith(".parquet")]
    for f in files:
        _strip_order_marker(f)
    w2 = data.uniform_batch()
    batches = {"W2": w2, "W2 inserts only": w2.filter(pc.greater_equal(w2["id"], data.rows))}
    results = {"rows": data.rows, "batch": data.batch, "files": len(files)}
    for name, batch in batches.items():
        pairs = _pairs(path, batch)
        result = {"files_paired": sum(1 for _, c in pairs if len(c)), "keys_paired": sum(len(c) for _, c in pairs)}
        for label, choose in (("before", lambda meta, _path: _before(meta)),
                              ("after", lambda meta, p: trusted_bloom_filter(_AsJavaWrote(meta), p)),
                              ("after, read as an unmarked Arrow file", trusted_bloom_filter)):
            result[label] = min((_step(pairs, choose) for _ in range(3)), key=lambda r: r["seconds"])
            log.info("%s %s: %s", name, label, result[label])
        results[name] = result
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bloom_pruning", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=200_000)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import sqlext

    spark = sqlext.session(master="local[2]", metastore=False, conf={"spark.ui.enabled": "false"})
    with tempfile.TemporaryDirectory(prefix="bench-bloom-") as work:
        result = run(spark, os.path.join(work, "t"), DataSet(args.rows, args.batch))
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, f"bloom-pruning-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    for name in ("W2", "W2 inserts only"):
        for label in ("before", "after", "after, read as an unmarked Arrow file"):
            r, paired = result[name][label], result[name]
            print(f"{name} {label}: {r['files_exactly_checked']} of {paired['files_paired']} paired files exactly "
                  f"checked, {r['keys_exactly_checked']} of {paired['keys_paired']} keys, {r['keys_found']} found, "
                  f"{r['seconds']} s")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
