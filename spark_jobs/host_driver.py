"""spark-submit entry point of a host's long-lived driver: ``spark_jobs/host_driver.py --serve FOLDER``.

The serving loop is :mod:`spark_jobs.driver.host`; each job's body is a run's
(:func:`spark_jobs.run.runner.run_pipeline`) or a maintenance's (:func:`spark_jobs.run.maintenance.maintain_pipeline`).
"""

from __future__ import annotations

import sys

from spark_jobs.driver.start import prefer_installed_pyspark

if __name__ == "__main__":
    prefer_installed_pyspark()
    from spark_jobs.driver.host import serve
    from spark_jobs.run.maintenance import maintain_pipeline
    from spark_jobs.run.runner import run_pipeline

    sys.exit(serve(sys.argv[1:], {"run": run_pipeline, "maintain": maintain_pipeline}))
