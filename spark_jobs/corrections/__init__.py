"""Corrections: backfills of a slice, and the rebuilds that carry an upstream change down a chain."""
