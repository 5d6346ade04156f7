"""Table services (compaction) that run beside writers on a Hudi table."""

# the metadata table's own clean and archival run through the metadata writer once this package is loaded
from storage.table_service import metadata_table_services as _metadata_table_services  # noqa: F401,E402
