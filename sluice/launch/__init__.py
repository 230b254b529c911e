"""The launcher: one job request to one spark-submit, its lock held, its summary read back."""
