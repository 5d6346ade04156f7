"""The Avro layer: the binary codec (`decoder` / `encoder`, one datum at a time for any schema; `columnar` and
`columnar_encoder` for flat records in bulk), Avro schemas of table data (converted from/to arrow as Java Hudi
spells them), the Avro models of timeline metadata, and the single-record Avro container files Java Hudi writes
as instant files."""
from storage.avro.container import read_avro_container, read_avro_container_with_schema, write_avro_container
from storage.avro.decoder import BinaryDecoder, DatumReader, decode_datum
from storage.avro.encoder import BinaryEncoder, DatumWriter, encode_datum
from storage.avro.models import MODEL_SCHEMAS, model_schema
from storage.avro.schema_converter import (
    META_FIELD_NAMES,
    META_FIELDS,
    add_meta_fields,
    arrow_to_avro_schema,
    arrow_to_create_schema,
    avro_schema_to_json,
    avro_to_arrow_schema,
    remove_meta_fields,
)

__all__ = [
    "BinaryDecoder",
    "BinaryEncoder",
    "DatumReader",
    "DatumWriter",
    "META_FIELDS",
    "META_FIELD_NAMES",
    "MODEL_SCHEMAS",
    "add_meta_fields",
    "arrow_to_avro_schema",
    "arrow_to_create_schema",
    "avro_schema_to_json",
    "avro_to_arrow_schema",
    "decode_datum",
    "encode_datum",
    "model_schema",
    "read_avro_container",
    "read_avro_container_with_schema",
    "remove_meta_fields",
    "write_avro_container",
]
