"""The SparkSession a sluice run (or the test suite) uses."""

from __future__ import annotations

import os

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from sluice.settings import Settings
from sluice.spark_conf import (
    LOCAL_FILE_SYSTEM,
    default_spark_conf,
    driver_java_options,
    s3a_conf,
)


def get_session(app_name: str = "sluice") -> SparkSession:
    """The session spark-submit configured (master, jars and conf come from the command line)."""
    return local_file_system(SparkSession.builder.appName(app_name).getOrCreate())


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
    return local_file_system(builder.getOrCreate())


def local_file_system(spark: SparkSession) -> SparkSession:
    """On a local master, with sluice's files jar loaded: its ``file:`` file system in the session's Hadoop
    configuration (:data:`sluice.spark_conf.LOCAL_FILE_SYSTEM`; one a deployment's or spec's Spark settings
    name is kept). A cluster's executors need not have the jar on their class path: they keep Hadoop's."""
    context = spark.sparkContext
    if not context.master.startswith("local"):
        return spark
    jvm = context._jvm
    try:
        jvm.java.lang.Class.forName(LOCAL_FILE_SYSTEM["fs.file.impl"], False,
                                    jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Py4JError:  # no files jar: Hadoop's own
        return spark
    hadoop, given = context._jsc.hadoopConfiguration(), context.getConf()
    for key, value in LOCAL_FILE_SYSTEM.items():
        if not given.contains(f"spark.hadoop.{key}"):
            hadoop.set(key, value)
    return spark
