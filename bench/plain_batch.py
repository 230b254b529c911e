"""The reference for `make bench`: plain Spark batch jobs doing what a sluice run does, timed the same way.

    spark-submit ... bench/plain_batch.py json  SOURCE_DIR TABLE_DIR SCHEMA
    spark-submit ... bench/plain_batch.py kafka BOOTSTRAP TOPIC TABLE_DIR SCHEMA

Prints one JSON line: rows written and the seconds the read+write took (session start excluded).
"""

from __future__ import annotations

import json
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main(argv: list[str]) -> None:
    spark = SparkSession.builder.appName("bench-plain").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter()
    if argv[0] == "json":
        _, source, table, schema = argv
        df = spark.read.schema(schema).json(source)
    elif argv[0] == "kafka":
        _, bootstrap, topic, table, schema = argv
        raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
               .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
        parsed = raw.select(F.from_json(F.col("value").cast("string"), schema).alias("v"), "key", "topic",
                            "partition", "offset", "timestamp")
        df = parsed.select("v.*", F.col("key").cast("string"), "topic", "partition", "offset", "timestamp")
    else:
        raise SystemExit(f"unknown case {argv[0]!r}")
    df.write.format("delta").mode("append").save(table)
    seconds = time.perf_counter() - started
    rows = spark.read.format("delta").load(table).count()
    spark.stop()
    print(json.dumps({"rows": rows, "seconds": round(seconds, 3)}))


if __name__ == "__main__":
    main(sys.argv[1:])
