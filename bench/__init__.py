"""`make bench` (run_bench.py: sluice against plain Spark) and `make chaos` (chaos.py: runs killed at random
moments), run from the project's folder as modules: ``python -m bench.run_bench [CASE]``, ``python -m bench.chaos``."""

import sys
from pathlib import Path

HOME = Path(__file__).resolve().parent.parent
"""The project's folder."""
BIN = Path(sys.executable).parent
"""The virtualenv's commands (``sluice``, ``airflow``)."""
RESULTS = HOME / "bench" / "results"
