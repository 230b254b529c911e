"""The reference for `make bench`: plain Spark batch jobs doing what a sluice run does, timed the same way.

    spark-submit ... bench/plain_batch.py json  SOURCE_DIR TABLE_DIR SCHEMA
    spark-submit ... bench/plain_batch.py json_permissive SOURCE_DIR TABLE_DIR BAD_TABLE_DIR SCHEMA
                     (bad records kept by hand: PERMISSIVE + a corrupt-record column, the source read once
                     and cached, good rows to TABLE_DIR, bad ones to BAD_TABLE_DIR)
    spark-submit ... bench/plain_batch.py kafka BOOTSTRAP TOPIC TABLE_DIR SCHEMA
    spark-submit ... bench/plain_batch.py session        (start a session and stop: the floor of any run)
    spark-submit ... bench/plain_batch.py list SOURCE_DIR  (the files Spark would read: its own listing)
    spark-submit ... bench/plain_batch.py merge SOURCE_DIR TABLE_DIR SCHEMA KEY ORDER_BY
                     (batch MERGE of the JSON files into the table: latest ORDER_BY per key, newer wins)

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
    if argv[0] == "session":
        spark.stop()
        print(json.dumps({"rows": 0, "seconds": 0.0}))
        return
    if argv[0] == "list":
        files = spark.read.format("text").load(argv[1]).inputFiles()
        seconds = time.perf_counter() - started
        spark.stop()
        print(json.dumps({"rows": len(files), "seconds": round(seconds, 3)}))
        return
    if argv[0] == "json":
        _, source, table, schema = argv
        df = spark.read.schema(schema).json(source)
    elif argv[0] == "json_permissive":
        _, source, table, bad_table, schema = argv
        read = (spark.read.schema(f"{schema}, _corrupt_record STRING").option("mode", "PERMISSIVE")
                .option("columnNameOfCorruptRecord", "_corrupt_record").json(source).cache())
        read.where("_corrupt_record IS NOT NULL").write.format("delta").mode("append").save(bad_table)
        df = read.where("_corrupt_record IS NULL").drop("_corrupt_record")
    elif argv[0] == "kafka":
        _, bootstrap, topic, table, schema = argv
        raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
               .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
        parsed = raw.select(F.from_json(F.col("value").cast("string"), schema).alias("v"), "key", "topic",
                            "partition", "offset", "timestamp")
        df = parsed.select("v.*", F.col("key").cast("string"), "topic", "partition", "offset", "timestamp")
    elif argv[0] == "merge":
        from delta.tables import DeltaTable
        from pyspark.sql import Window

        _, source, table, schema, key, order = argv
        updates = spark.read.schema(schema).json(source)
        latest = Window.partitionBy(key).orderBy(F.col(order).desc())
        updates = updates.withColumn("_rank", F.row_number().over(latest)).where("_rank = 1").drop("_rank")
        columns = {f"`{c}`": f"s.`{c}`" for c in updates.columns}
        (DeltaTable.forPath(spark, table).alias("t").merge(updates.alias("s"), f"t.`{key}` = s.`{key}`")
         .whenMatchedUpdate(f"s.`{order}` >= t.`{order}`", set=columns).whenNotMatchedInsert(values=columns)
         .execute())
        seconds = time.perf_counter() - started
        spark.stop()
        print(json.dumps({"rows": updates_count(source), "seconds": round(seconds, 3)}))
        return
    else:
        raise SystemExit(f"unknown case {argv[0]!r}")
    df.write.format("delta").mode("append").save(table)
    seconds = time.perf_counter() - started
    rows = spark.read.format("delta").load(table).count()
    spark.stop()
    print(json.dumps({"rows": rows, "seconds": round(seconds, 3)}))


def updates_count(source: str) -> int:
    """Lines in the JSON files (one record each), counted outside Spark so the timing stays the MERGE's."""
    from pathlib import Path

    return sum(sum(1 for _ in f.open(encoding="utf-8")) for f in Path(source).glob("*.json"))


if __name__ == "__main__":
    main(sys.argv[1:])
