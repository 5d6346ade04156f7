"""File groups on disk: the log files of a file slice (log blocks, log file reader and writer) and friends."""
