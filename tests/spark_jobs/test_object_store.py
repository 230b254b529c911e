"""Delta and Structured Streaming on object storage (s3a://), against the project's real S3 server.

The jar set ``make jars`` fetches for S3A (Hadoop 3.5.0's hadoop-aws and the AWS SDK v2 modules it uses,
not the SDK bundle) must carry a one-shot query whose source, Delta sink and checkpoint are all in a bucket:
two runs, each file once.
"""

from __future__ import annotations

import json

import pytest
from pyarrow import fs as pafs

from devservices.s3_server import create_bucket, filesystem
from sluice.settings import load_settings
from sluice.spark_conf import s3a_conf

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bucket(spark, s3_server):
    """A bucket the in-process session reaches: S3A's settings from the server's AWS variables (a per-bucket
    key and secret stand in for the environment, which this JVM started without)."""
    name = "sluice-s3a"
    create_bucket(s3_server, name)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    env = s3_server.env()
    for key, value in s3a_conf(env, load_settings()).items():
        hadoop.set(key.removeprefix("spark.hadoop."), value)
    hadoop.set(f"fs.s3a.bucket.{name}.access.key", env["AWS_ACCESS_KEY_ID"])
    hadoop.set(f"fs.s3a.bucket.{name}.secret.key", env["AWS_SECRET_ACCESS_KEY"])
    return name


def _land(s3_server, bucket: str, name: str, ids: range, folder: str = "landing") -> None:
    with filesystem(s3_server).open_output_stream(f"{bucket}/{folder}/{name}") as out:
        out.write("".join(json.dumps({"id": i, "amount": i * 1.5}) + "\n" for i in ids).encode())


def _run_once(spark, bucket: str) -> None:
    stream = spark.readStream.schema("id BIGINT, amount DOUBLE").json(f"s3a://{bucket}/landing")
    query = (stream.writeStream.format("delta").option("checkpointLocation", f"s3a://{bucket}/checkpoints/orders")
             .trigger(availableNow=True).start(f"s3a://{bucket}/tables/orders"))
    query.awaitTermination()


def test_a_one_shot_query_from_a_bucket_into_delta_in_the_bucket_takes_each_file_once(spark, s3_server, bucket):
    from deltalake import DeltaTable

    _land(s3_server, bucket, "a.json", range(0, 3))
    _land(s3_server, bucket, "b.json", range(3, 5))
    _run_once(spark, bucket)
    _land(s3_server, bucket, "c.json", range(5, 8))
    _run_once(spark, bucket)
    _run_once(spark, bucket)  # nothing new: nothing written
    rows = spark.read.format("delta").load(f"s3a://{bucket}/tables/orders")
    assert sorted(r.id for r in rows.collect()) == list(range(8))
    # the checkpoint and the Delta log are objects in the bucket, read back by another client (delta-rs)
    env = s3_server.env()
    table = DeltaTable(f"s3://{bucket}/tables/orders", storage_options={
        "AWS_ENDPOINT_URL": env["AWS_ENDPOINT_URL"], "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"], "AWS_REGION": env["AWS_REGION"],
        "AWS_ALLOW_HTTP": "true"})
    # one commit per run that found files (the sink creates the table in its first commit)
    assert table.version() == 1 and sorted(table.to_pyarrow_table()["id"].to_pylist()) == list(range(8))
    listed = filesystem(s3_server).get_file_info(pafs.FileSelector(f"{bucket}/checkpoints/orders/commits"))
    assert sorted(i.base_name for i in listed) == ["0", "1"]


def _pages_of_two(spark, bucket: str, request) -> None:
    """This bucket's client lists in pages of 2 objects until the test ends (S3A's per-bucket setting), so a
    listing takes several LIST requests."""
    # CI's order, made certain: the bucket's client is not the JVM's first S3A client (S3A's storage
    # statistics are one per JVM, bound to the first; the count must be this client's own)
    jvm = spark._jvm
    uri, conf = jvm.java.net.URI(f"s3a://{bucket}/"), spark._jsc.hadoopConfiguration()
    jvm.org.apache.hadoop.fs.FileSystem.newInstance(uri, conf).close()
    jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf).close()  # out of the cache: the next is a new client
    # pages of 2 objects for this bucket's client (S3A's per-bucket setting), so a listing takes several LIST
    # requests: the first and each continuation are counted
    paging = f"fs.s3a.bucket.{bucket}.paging.maximum"
    conf.set(paging, "2")

    def default_paging() -> None:  # the later tests' clients list as S3A does by default
        conf.unset(paging)
        jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf).close()

    request.addfinalizer(default_paging)


def _run_indexed(spark, bucket: str, name: str, listing: str = "full") -> dict:
    from spark_jobs.sources.files import INDEXED_SOURCE

    checkpoint = f"s3a://{bucket}/checkpoints/{name}"
    stream = (spark.readStream.format(INDEXED_SOURCE).option("sluice.format", "json").option("sluice.listing", listing)
              .schema("id BIGINT, amount DOUBLE").load(f"s3a://{bucket}/{name}"))
    query = (stream.writeStream.format("delta").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start(f"s3a://{bucket}/tables/{name}"))
    query.awaitTermination()
    return json.loads(spark._jvm.dev.sluice.files.IndexedFileSource.report(f"{checkpoint}/sources/0"))


def test_sluices_discovery_in_a_bucket_lists_once_and_takes_each_file_once(spark, s3_server, bucket, request):
    # source.discovery: index on S3A: one recursive listing a run (its pages of objects), each file once
    _pages_of_two(spark, bucket, request)

    def run_once() -> dict:
        return _run_indexed(spark, bucket, "indexed")

    for name, ids in (("dt=2026-11-01/a.json", range(0, 3)), ("dt=2026-11-02/b.json", range(3, 5)),
                      ("_staging/c.json", range(100, 101))):  # a hidden folder: not read, as Spark skips it
        _land(s3_server, bucket, name, ids, folder="indexed")
    first = run_once()
    _land(s3_server, bucket, "dt=2026-11-02/d.json", range(5, 8), folder="indexed")
    second = run_once()
    third = run_once()
    assert [(r["new_files"], r["files_indexed"]) for r in (first, second, third)] == [(2, 2), (1, 3), (0, 3)]
    # three objects, then four, in pages of two: two LIST requests a run (S3A's own count: the first page and
    # its continuation)
    assert [r["list_requests"] for r in (first, second, third)] == [2, 2, 2]
    rows = spark.read.format("delta").load(f"s3a://{bucket}/tables/indexed")
    assert sorted((r.id, str(r.dt)) for r in rows.collect()) == [
        (0, "2026-11-01"), (1, "2026-11-01"), (2, "2026-11-01"), (3, "2026-11-02"), (4, "2026-11-02"),
        (5, "2026-11-02"), (6, "2026-11-02"), (7, "2026-11-02")]


def test_an_incremental_listing_in_a_bucket_asks_for_the_keys_after_its_mark(spark, s3_server, bucket, request):
    # source.listing: incremental on S3A: ListObjectsV2 with StartAfter, the tail of the folder in one request
    _pages_of_two(spark, bucket, request)
    listing = "incremental,0,86400000"  # look_back 0s, full_listing_every 1d
    for n in range(5):
        _land(s3_server, bucket, f"2026-12-06T0{n}.json", range(n * 10, n * 10 + 2), folder="tail")
    first = _run_indexed(spark, bucket, "tail", listing)
    assert (first["listing"], first["new_files"], first["list_requests"]) == ("full", 5, 3)  # 5 keys, pages of 2
    _land(s3_server, bucket, "2026-12-06T05.json", range(50, 52), folder="tail")
    second = _run_indexed(spark, bucket, "tail", listing)
    assert (second["listing"], second["start_after"], second["new_files"], second["list_requests"]) == (
        "incremental", "2026-12-06T04.json", 1, 1)
    _land(s3_server, bucket, "2026-12-06T00-late.json", range(90, 91), folder="tail")  # below the mark: late
    third = _run_indexed(spark, bucket, "tail", listing)
    assert (third["start_after"], third["new_files"], third["list_requests"]) == ("2026-12-06T05.json", 0, 1)
    rows = spark.read.format("delta").load(f"s3a://{bucket}/tables/tail")
    assert sorted(r.id for r in rows.collect()) == [n * 10 + i for n in range(6) for i in range(2)]
    full = _run_indexed(spark, bucket, "tail")  # a full listing (the spec's full_listing_every, due) reads it
    assert (full["new_files"], full["list_requests"]) == (1, 4)
    assert spark.read.format("delta").load(f"s3a://{bucket}/tables/tail").count() == 13
