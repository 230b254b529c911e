"""A table's schema over time: inferred schemas stored in the checkpoint, and what a run would change."""
