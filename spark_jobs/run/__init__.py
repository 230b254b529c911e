"""The run: one run of a pipeline (the runner), of maintenance, of `sluice show`, and the clean-up of its landing files."""
