"""The table: its configuration (`hoodie.properties`), meta client and file-system view."""
