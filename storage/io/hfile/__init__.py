"""HFile (version 3) reading and writing, as the Hudi metadata table uses it (base files and HFILE_DATA_BLOCK
log blocks): `format` holds the on-disk structures, `reader` and `writer` the two directions."""
from storage.io.hfile.format import HoodieHFileError
from storage.io.hfile.reader import Cell, HFileReader, hfile_from_log_block, read_hfile
from storage.io.hfile.writer import Flavor, HFileWriteOptions, write_hfile

__all__ = ["Cell", "Flavor", "HFileReader", "HFileWriteOptions", "HoodieHFileError", "hfile_from_log_block",
           "read_hfile", "write_hfile"]
