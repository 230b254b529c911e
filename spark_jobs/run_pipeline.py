"""spark-submit entry point of a run: ``spark_jobs/run_pipeline.py --request REQUEST.json``.

The driver shell is :mod:`spark_jobs.driver.job`; the run itself :func:`spark_jobs.run.runner.run_pipeline`.
The SparkSession starts first, on a thread, while the rest is imported (:mod:`spark_jobs.driver.start`).
"""

from __future__ import annotations

import sys

from spark_jobs.driver.start import prefer_installed_pyspark, start_session

if __name__ == "__main__":
    prefer_installed_pyspark()
    session = start_session()
    from spark_jobs.driver.job import main
    from spark_jobs.run.runner import run_pipeline

    sys.exit(main(sys.argv[1:], run_pipeline, what="run", session=session))
