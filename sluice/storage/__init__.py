"""Where sluice reads and writes itself, by URI: files, the object store, checkpoints, Delta logs, locks."""
