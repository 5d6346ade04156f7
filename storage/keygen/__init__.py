"""Key generators: the record key and partition path of each row, as Spark column expressions."""
from storage.keygen.key_generator import (  # noqa: F401
    HoodieKeyError,
    KeyGenerator,
    create_key_generator,
    resolve_keygen_type,
)
