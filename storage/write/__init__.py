"""The write pipeline: prepare (keys, dedup), index lookup, workload profile and bucketing, per-bucket
write tasks in Arrow, and the commit that publishes them."""
