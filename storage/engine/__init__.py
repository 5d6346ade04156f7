"""How work is laid out on an engine (today Spark's tasks): helpers the write path, the index and the table services
share, below all of them."""
