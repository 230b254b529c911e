"""The spark-submit entry point's start-up: where the driver imports pyspark from."""

from __future__ import annotations

from pathlib import Path

import pyspark

from spark_jobs.run_pipeline import prefer_installed_pyspark

SITE = Path(pyspark.__file__).parent.parent  # the installed package's site-packages
ZIPS = [str(SITE / "pyspark" / "python" / "lib" / "pyspark.zip"),
        str(SITE / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip")]


def test_the_installed_pysparks_own_zips_go_after_the_installed_package():
    # spark-submit's PYTHONPATH puts the zips first; the installed package (byte-compiled) is the same code
    path = [*ZIPS, "/app", str(SITE)]

    prefer_installed_pyspark(path)

    assert path == ["/app", str(SITE), *ZIPS]


def test_zips_of_another_spark_stay_first():
    # a Spark distribution's own python/lib (SPARK_HOME=/opt/spark): another pyspark than the installed one
    other = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-0.10.9.9-src.zip"]
    path = [*other, str(SITE)]

    prefer_installed_pyspark(path)

    assert path == [*other, str(SITE)]


def test_without_the_installed_package_on_the_path_the_zips_stay():
    path = [*ZIPS, "/app"]

    prefer_installed_pyspark(path)

    assert path == [*ZIPS, "/app"]
