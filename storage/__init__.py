"""The Apache Hudi table format and its engine on Spark.

`storage` knows nothing of SQL or metastores: it reads and writes Hudi tables (table version 6, timeline
layout 1; tables of version 8 are read too) and runs the write pipeline on Spark.
"""
