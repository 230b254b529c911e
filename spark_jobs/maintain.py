"""spark-submit entry point of a maintenance run: ``spark_jobs/maintain.py --request REQUEST.json``.

The driver shell is :mod:`spark_jobs.driver.job`; the maintenance itself
:func:`spark_jobs.run.maintenance.maintain_pipeline`. The SparkSession starts first, on a thread, while the rest
is imported (:mod:`spark_jobs.driver.start`).
"""

from __future__ import annotations

import sys

from spark_jobs.driver.start import prefer_installed_pyspark, start_session

if __name__ == "__main__":
    prefer_installed_pyspark()
    session = start_session()
    from spark_jobs.driver.job import main
    from spark_jobs.run.maintenance import maintain_pipeline

    sys.exit(main(sys.argv[1:], maintain_pipeline, what="maintenance", session=session))
