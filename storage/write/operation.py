"""Write operations, with Apache Hudi's names."""
from __future__ import annotations

from enum import Enum

from storage.config import WriteConfigKeys as WK


class WriteOperationType(str, Enum):
    INSERT = "insert"
    UPSERT = "upsert"
    BULK_INSERT = "bulk_insert"
    DELETE = "delete"
    INSERT_OVERWRITE = "insert_overwrite"
    INSERT_OVERWRITE_TABLE = "insert_overwrite_table"
    DELETE_PARTITION = "delete_partition"

    @classmethod
    def parse(cls, value: str) -> "WriteOperationType":
        text = str(value).strip().lower()
        for op in cls:
            if op.value == text:
                return op
        raise ValueError(
            f"unknown write operation {value!r} ({WK.OPERATION.key}); "
            f"supported: {', '.join(op.value for op in cls)}"
        )

    @property
    def metadata_name(self) -> str:
        """The name recorded as `operationType` in commit metadata."""
        return self.name

    @property
    def is_overwrite(self) -> bool:
        return self in (WriteOperationType.INSERT_OVERWRITE, WriteOperationType.INSERT_OVERWRITE_TABLE,
                        WriteOperationType.DELETE_PARTITION)

    @property
    def uses_index(self) -> bool:
        return self in (WriteOperationType.UPSERT, WriteOperationType.DELETE)

    @property
    def commit_action(self) -> str:
        return "replacecommit" if self.is_overwrite else "commit"
