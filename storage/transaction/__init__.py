"""Transactions on a table (Hudi's `org.apache.hudi.client.transaction`): lock providers, the lock manager, the
transaction manager and the conflict resolution of optimistic concurrency control."""
