"""HFILE_DATA_BLOCK log blocks (the metadata table's upserts): every such block of the Java fixtures comes back as
a typed `HFileDataBlock` whose cells are the embedded HFile's, re-encodes to Java's bytes, and a block built here
reads back; damaged content is a `HoodieCorruptedLogError`, never a short cell list."""
from __future__ import annotations

import pytest

from storage.file_group.log_block import (
    HeaderMetadataType,
    HFileDataBlock,
    HoodieCorruptedLogError,
    HoodieLogBlockType,
    make_block,
)
from storage.file_group.log_format import HoodieLogFileReader, read_log_blocks, serialize_block
from storage.io.hfile.writer import write_hfile


def _log_blocks(mdt_hfiles):
    """(MdtHFile, the block the engine's log reader finds at its offset) for every log-block HFile."""
    out = []
    for item in (h for h in mdt_hfiles if not h.is_base):
        with HoodieLogFileReader(str(item.path), lazy=False) as reader:
            blocks = {b.offset: b for b in reader}
        out.append((item, blocks[item.block_offset]))
    return out


def test_every_fixture_hfile_block_is_typed_and_holds_the_embedded_hfile(mdt_hfiles):
    pairs = _log_blocks(mdt_hfiles)
    assert len(pairs) > 100
    for item, block in pairs:
        assert isinstance(block, HFileDataBlock), item.label
        assert block.read_content() == item.data
        assert block.schema_json == item.header_schema
        assert block.instant_time and item.path.name.split("_")[1].startswith(block.instant_time[:14])
        assert block.cells(str(item.path)) == item.reader().read_all(), item.label
        assert block.record_count() == item.reader().entry_count


def test_fixture_hfile_blocks_reencode_to_javas_bytes(mdt_hfiles):
    for item, block in _log_blocks(mdt_hfiles):
        raw = item.path.read_bytes()
        assert serialize_block(block) == raw[block.offset:block.offset + block.size], item.label


def test_a_block_built_here_reads_back(tmp_path):
    cells = [(b"key-%03d" % i, b"value-%d" % i) for i in range(50)]
    hfile = write_hfile(cells, file_info=[(b"schema", b'{"type":"string"}')])
    block = HFileDataBlock.from_hfile(hfile, '{"type":"string"}', "20260101000000000")
    assert block.header[HeaderMetadataType.INSTANT_TIME] == "20260101000000000"
    (read,) = read_log_blocks(serialize_block(block))
    assert isinstance(read, HFileDataBlock)
    assert [(c.key, c.value) for c in read.cells()] == cells
    assert read.hfile().get("key-007") == b"value-7"
    generic = make_block(HoodieLogBlockType.HFILE_DATA_BLOCK, {}, {}, hfile)
    assert isinstance(generic, HFileDataBlock)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_hfile_content_is_a_corrupted_log_error(damage):
    hfile = write_hfile([(b"a", b"1"), (b"b", b"2")], file_info=[(b"schema", b"{}")])
    if damage == "truncate":
        content = hfile[:-100]
    else:
        content = bytearray(hfile)
        content[50] ^= 0xFF  # inside the deflate data of the data block (its gzip header ends at 43)
        content = bytes(content)
    block = HFileDataBlock.from_hfile(content, "{}", "1")
    with pytest.raises(HoodieCorruptedLogError, match="some/log/file"):
        block.cells("some/log/file")
