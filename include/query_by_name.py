"""Query sluice's tables by name from a plain PySpark session: the one outside reader every BI tool or notebook
is. The session is started with the settings `sluice catalog conf` prints (Hive's catalog on the metastore the
tables are registered in, Delta's catalog over it), nothing of sluice's own.

    .venv/bin/python include/query_by_name.py "SELECT * FROM gold.revenue_by_region ORDER BY day, region"
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession


def main(query: str) -> None:
    sluice = Path(sys.executable).parent / "sluice"
    conf = json.loads(subprocess.run([str(sluice), "catalog", "conf", "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master("local[2]").appName("query-by-name")
    small = {"spark.sql.shuffle.partitions": "2", "spark.databricks.delta.snapshotPartitions": "2",
             "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}  # a laptop's session
    for key, value in {**conf, **small}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(query).show(50, truncate=False)
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit('usage: include/query_by_name.py "SELECT ... FROM bronze.orders"')
    main(sys.argv[1])
