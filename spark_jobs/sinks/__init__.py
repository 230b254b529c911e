"""Sinks: each micro-batch to its Delta table (append, MERGE, SCD2) as one exactly-once commit, and the table's schema evolving."""
