"""Records that are never lost: parsing into good rows and bad ones, expectations, the quarantine."""
