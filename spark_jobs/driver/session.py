"""The SparkSession a sluice run (or the test suite) uses."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from sluice.settings import Settings
from sluice.spark_conf import default_spark_conf, driver_java_options, s3a_conf


def get_session(app_name: str = "sluice") -> SparkSession:
    """The session spark-submit configured (master, jars and conf come from the command line)."""
    return SparkSession.builder.appName(app_name).getOrCreate()


def local_session(settings: Settings, app_name: str = "sluice-local", extra_conf: dict[str, str] | None = None) -> SparkSession:
    """An in-process ``local[2]`` session with the same jars and conf as a spark-submit run, S3A's included.

    Used where no spark-submit is wanted: the test suite's session fixture and ``sluice show``.
    """
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    jars = [*settings.spark_jars(), *settings.object_store_jars()]
    conf = {**default_spark_conf(), **s3a_conf(os.environ, settings), "spark.jars": ",".join(str(j) for j in jars),
            **settings.spark_conf, **(extra_conf or {})}
    java_options = driver_java_options(settings)
    if java_options:
        conf["spark.driver.extraJavaOptions"] = " ".join(java_options)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
