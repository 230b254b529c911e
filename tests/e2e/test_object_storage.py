"""sluice's own files on object storage, against the project's real S3 server (SeaweedFS): the Delta log read
through the store, the pipeline lock as a lease object in it, the ledger appended by several processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from pyarrow import fs as pafs

from devservices.s3_server import create_bucket
from sluice.storage.delta_log import DeltaLog, log_state
from sluice.storage.files import Storage
from sluice.storage.lock import (
    LeaseLock,
    LeaseLost,
    PipelineBusy,
    check_held,
    driver_lock,
)
from sluice.storage.object_store import ObjectStore
from tests.e2e.conftest import wait_for
from tests.sluice.test_delta_log import SCHEMA, _table

BUCKET = "sluice-own"


@pytest.fixture(scope="module")
def bucket(s3_server):
    create_bucket(s3_server, BUCKET)
    return BUCKET


@pytest.fixture
def aws_env(s3_server, monkeypatch):
    """The standard AWS variables of the server, as `eval "$(sluice s3 env)"` sets them."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    return s3_server.env()


@pytest.fixture
def here(spark, s3_server, bucket, aws_env):
    """Set-up runs in the test's own session (``tests.helpers.ran_here``) on the bucket: S3A's settings from the
    server's AWS variables, a per-bucket key and secret standing in for the environment this JVM started
    without. The runs a test is about stay `sluice run` processes; returns ``run(name, **job) -> summary`` (``job``:
    :func:`sluice.contract.run_job`'s fields, e.g. ``dry_run=True``)."""
    from sluice.settings import load_settings
    from sluice.spark_conf import s3a_conf
    from tests.helpers import ran_here

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3a_conf(aws_env, load_settings()).items():
        hadoop.set(key.removeprefix("spark.hadoop."), value)
    hadoop.set(f"fs.s3a.bucket.{bucket}.access.key", aws_env["AWS_ACCESS_KEY_ID"])
    hadoop.set(f"fs.s3a.bucket.{bucket}.secret.key", aws_env["AWS_SECRET_ACCESS_KEY"])

    def run(name: str, **job) -> dict:
        # the test's SLUICE_LAKE_ROOT and SLUICE_CHECKPOINT_ROOT (in the bucket), read at the run
        return ran_here(spark, load_settings(), name, run_id=f"set-up-{name}", **job)

    return run


def test_the_delta_log_of_a_table_in_a_bucket_is_read_through_the_store(s3_server, bucket, aws_env, tmp_path):
    local = _table(tmp_path)
    store = ObjectStore.from_env().arrow()  # the first write to a bucket waits for its volumes: patient timeouts
    pafs.copy_files(str(local), f"{bucket}/lake/orders", destination_filesystem=store)
    log = DeltaLog.open(f"s3a://{bucket}/lake/orders")
    assert log is not None and log.versions() == [0, 1]
    assert log_state(f"s3a://{bucket}/lake/orders") == {
        "version": 1, "properties": {"sluice.pipeline": "orders"}, "num_files": 1, "columns": ["id", "day"],
        "schema": SCHEMA}
    assert [row["operation"] for row in log.history()] == ["CREATE TABLE", "WRITE"]
    assert DeltaLog.open(f"s3a://{bucket}/lake/nothing") is None


def test_the_lock_in_a_bucket_refuses_a_second_holder_and_frees_itself_on_release(bucket, aws_env):
    root = f"s3a://{bucket}/checkpoints"
    # a lease long enough that "renewed within 3/4 of it" holds on a loaded machine too: renewals every 3 s, and
    # check_held() accepts one up to 9 s old (a 6 s lease left 4.5 s for a PUT under load)
    lease = 12
    first = driver_lock(root, "orders", {"run_id": "first"}, lease_seconds=lease).acquire()
    assert isinstance(first, LeaseLock)
    try:
        with pytest.raises(PipelineBusy) as refused:
            driver_lock(root, "orders", {"run_id": "second"}, lease_seconds=lease).acquire()
        assert "run first" in str(refused.value) and "12 s after it died (its lease)" in str(refused.value)
        assert str(refused.value).endswith(f"Lock file: {root}/_locks/orders.driver.lock")
        time.sleep(lease + 2)  # longer than the lease: renewed by its holder, still held
        check_held()
        # a renewal the store applied but whose answer the holder never saw (a timeout on a busy store): the
        # object's etag changed, its holder did not -- still held, renewed from there, released at the end
        client, key = first.client, "checkpoints/_locks/orders.driver.lock"
        body = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        client.put_object(Bucket=bucket, Key=key, Body=json.dumps({**body, "writes": body["writes"] + 1000}).encode())
        check_held()

        def renewed_by_the_holder() -> dict | None:  # it writes the object again, with its own count of writes
            current = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            return current if current["writes"] != body["writes"] + 1000 else None

        renewed = wait_for("the holder's next renewal", renewed_by_the_holder, 6 * lease, every=0.5)
        assert (renewed["token"], renewed["run_id"]) == (body["token"], "first")
        assert body["writes"] < renewed["writes"] < body["writes"] + 1000, (body, renewed)
        check_held()
        with pytest.raises(PipelineBusy):
            driver_lock(root, "orders", {"run_id": "second"}, lease_seconds=lease).acquire()
    finally:
        first.release()
    assert ObjectStore.from_env().arrow().get_file_info(f"{bucket}/{key}").type == pafs.FileType.NotFound
    with driver_lock(root, "orders", {"run_id": "third"}, lease_seconds=lease):
        check_held()
        # another holder's object (its own token) in its place: the lease is lost, named
        body = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        client.put_object(Bucket=bucket, Key=key, Body=json.dumps({**body, "token": "someone-else", "run_id": "fourth"})
                          .encode())
        with pytest.raises(LeaseLost) as lost:
            check_held()
        assert "lost its lock" in str(lost.value) and "run fourth" in str(lost.value), str(lost.value)
    check_held()  # nothing held: nothing to check


HOLDER = """
import sys, time
from sluice.storage.lock import driver_lock
lock = driver_lock(sys.argv[1], "paused", {"run_id": "paused-holder"}, lease_seconds=float(sys.argv[2])).acquire()
print("held", flush=True)
time.sleep(float(sys.argv[3]))  # SIGSTOP lands here
from sluice.storage.lock import LeaseLost, check_held
try:
    check_held()
    print("committed", flush=True)
except LeaseLost as lost:
    print("refused:", lost, flush=True)
"""


def test_a_holder_paused_past_its_lease_is_taken_over_and_does_not_commit(bucket, aws_env):
    """A driver stopped (SIGSTOP) past its lease: the next run takes the lock over; the paused one, resumed,
    checks its lease before its commit and refuses it."""
    root, lease = f"s3a://{bucket}/checkpoints", 8
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, root, str(lease), "3"], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ))
    try:
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, 19)  # SIGSTOP: no renewal, no commit
        started = time.monotonic()
        taker = driver_lock(root, "paused", {"run_id": "taker"}, lease_seconds=lease)
        taker.wait_seconds = 60
        taker.acquire()
        waited = time.monotonic() - started
        try:
            # taken over once the lease ran out (by the store's clock), not before: the holder renewed at most a
            # quarter of the lease before it was stopped, so a taker waits about the other three quarters (the
            # store's dates are whole seconds, a loaded holder renews late: half the lease is the bound asserted);
            # one that took a live lease would not wait at all
            assert lease / 2 <= waited < 40, waited
            os.kill(holder.pid, 18)  # SIGCONT
            out, _ = holder.communicate(timeout=60)
            assert out.startswith("refused: this run of pipeline paused lost its lock"), out
            check_held()  # the taker still holds it
            held = json.loads(filesystem_text(bucket, "checkpoints/_locks/paused.driver.lock"))
            assert held["run_id"] == "taker"
        finally:
            taker.release()
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, 18)
            holder.kill()
        holder.wait()


def filesystem_text(bucket: str, key: str) -> str:
    return Storage(f"s3a://{bucket}").read_text(key)


APPENDER = """
import json, sys, time
from pathlib import Path
from sluice.operations import ledger
from tests.sluice.test_ledger import summary
go = Path(sys.argv[3])
while not go.exists():  # all four start appending at the same moment
    time.sleep(0.01)
began = time.time()
for n in range(3):
    ledger.append_run(sys.argv[1], summary(f"p{sys.argv[2]}-{n}", started=f"2026-11-23T10:0{sys.argv[2]}:0{n}+00:00"))
print(json.dumps([began, time.time()]))
"""


def test_runs_appending_to_a_ledger_in_a_bucket_from_several_processes_lose_no_row(bucket, aws_env, tmp_path):
    """Every run appends its row from its own process: on the store each commit is a conditional put. The four
    appenders are released together and their appends overlap in time (checked), so their commits race."""
    from sluice.operations import ledger

    path = f"s3a://{bucket}/lake/_sluice/ledger"
    go = tmp_path / "go"
    appenders = [subprocess.Popen([sys.executable, "-c", APPENDER, path, str(p), str(go)], env=dict(os.environ),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in range(4)]
    time.sleep(3)  # the interpreters start and import the ledger's client meanwhile
    go.touch()
    outputs = [a.communicate(timeout=300) for a in appenders]
    assert [a.returncode for a in appenders] == [0, 0, 0, 0], [err for _, err in outputs]
    spans = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert max(began for began, _ in spans) < min(ended for _, ended in spans), spans  # all four at once
    runs = ledger.latest_runs(path, "orders", limit=50)
    assert sorted(r["run_id"] for r in runs) == sorted(f"p{p}-{n}" for p in range(4) for n in range(3))


# --- a pipeline whose lake, checkpoints and ledger are in a bucket --------------------------------------

def _land(bucket: str, key: str, ids: range, bad: int = 0) -> None:
    with ObjectStore.from_env().arrow().open_output_stream(f"{bucket}/{key}") as out:
        out.write(("".join(json.dumps({"id": i, "amount": i * 1.5}) + "\n" for i in ids) + "not json\n" * bad).encode())


def test_a_pipeline_with_its_lake_and_checkpoints_in_a_bucket_takes_each_record_once(bucket, aws_env, lake,
                                                                                      monkeypatch, here):
    """`sluice run` with SLUICE_LAKE_ROOT and SLUICE_CHECKPOINT_ROOT in a bucket: the source files, the table,
    the quarantine, the checkpoint, the lock and the ledger all in the store; a dry run changes none of them;
    a bad bucket is named before anything starts. The first run is a `sluice run` process (the store's
    variables reach its driver); the dry run and the runs after it are made in-process (``here``)."""
    from tests.e2e.conftest import last_json_line, sluice
    from tests.helpers import write_spec

    root = f"s3a://{bucket}/run"
    monkeypatch.setenv("SLUICE_LAKE_ROOT", f"{root}/lake")
    monkeypatch.setenv("SLUICE_CHECKPOINT_ROOT", f"{root}/checkpoints")
    write_spec(lake.pipelines_dir, {"name": "orders", "source": {"format": "json", "path": "landing/orders",
                                                                 "schema": "id BIGINT, amount DOUBLE"},
                                    "sink": {"path": "bronze/orders"}})
    _land(bucket, "run/lake/landing/orders/a.json", range(0, 5), bad=1)
    first = sluice("run", "orders")
    assert first.returncode == 0, first.stderr[-3000:]
    summary = last_json_line(first.stdout)
    assert (summary["input_rows"], summary["output_rows"], summary["quarantined_rows"]) == (6, 5, 1)
    assert summary["sink"] == f"{root}/lake/bronze/orders" and summary["ledger"] == f"{root}/lake/_sluice/ledger"
    assert _read(f"{root}/lake/bronze/orders", "id", "amount") == [(i, i * 1.5) for i in range(5)]

    _land(bucket, "run/lake/landing/orders/b.json", range(5, 8))
    checkpoint = Storage(f"{root}/checkpoints/orders")
    before = sorted(checkpoint.walk_files())
    dry = here("orders", dry_run=True)
    assert (dry["input_rows"], dry["dry_run"]) == (3, True)
    assert sorted(checkpoint.walk_files()) == before  # the checkpoint untouched
    assert Storage(f"{root}/checkpoints/_dry_runs").walk_files() == []  # its scratch copies deleted
    assert len(_read(f"{root}/lake/bronze/orders", "id", "amount")) == 5

    second, third = here("orders"), here("orders")
    assert (second["input_rows"], third["input_rows"]) == (3, 0)
    assert _read(f"{root}/lake/bronze/orders", "id", "amount") == [(i, i * 1.5) for i in range(8)]  # each record once
    assert Storage(f"{root}/checkpoints/_locks").walk_files() == []  # the leases released
    status = sluice("status", "orders")
    assert status.returncode == 0 and f"ledger {root}/lake/_sluice/ledger" in status.stdout, status.stderr
    modes = [line.split()[3] for line in status.stdout.splitlines() if "succeeded" in line]
    assert modes == ["incremental", "incremental", "dry_run", "incremental"], status.stdout  # newest first

    monkeypatch.setenv("SLUICE_LAKE_ROOT", "s3a://no-such-bucket/lake")
    missing = sluice("run", "orders")
    assert missing.returncode != 0
    assert "bucket no-such-bucket does not exist at http://127.0.0.1:" in missing.stderr, missing.stderr[-2000:]
    assert "spark-submit" not in missing.stderr  # said before anything started


def test_create_bucket_in_a_store_the_aws_variables_name(aws_env, monkeypatch, tmp_path):
    """As docker-compose's init service does: no local server of this project, the store named by the AWS_*
    variables."""
    from tests.e2e.conftest import sluice

    monkeypatch.setenv("SLUICE_HOME", str(tmp_path))  # no local server state here
    first, again = sluice("s3", "create-bucket", "made-by-env"), sluice("s3", "create-bucket", "made-by-env")
    assert (first.stdout.strip(), again.stdout.strip()) == ("s3: bucket made-by-env created",
                                                            "s3: bucket made-by-env exists"), first.stderr
    assert ObjectStore.from_env().arrow().get_file_info("made-by-env").type == pafs.FileType.Directory
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    refused = sluice("s3", "create-bucket", "nowhere")
    assert refused.returncode != 0 and "the local S3 server is not running" in refused.stderr


def test_a_chain_in_a_bucket_takes_a_backfill_down_to_gold_as_on_local_disk(bucket, aws_env, lake, monkeypatch,
                                                                            tmp_path, here):
    """bronze -> silver -> gold with every table and checkpoint in the bucket: the runs, a backfill of two days
    on bronze with a fixed transform, and the rebuilds down the chain give the tables of the local-disk test
    (tests/e2e/test_cli_corrections.py), row for row, read back with delta-rs."""
    from sluice.contract.request import run_request
    from sluice.spec import load_spec
    from tests.helpers import write_spec
    from tests.spark_jobs.test_corrections import BRONZE, GOLD, SILVER, TIMES_TEN, order

    root = f"s3a://{bucket}/chain"
    monkeypatch.setenv("SLUICE_LAKE_ROOT", f"{root}/lake")
    monkeypatch.setenv("SLUICE_CHECKPOINT_ROOT", f"{root}/checkpoints")
    regions = tmp_path / "regions.csv"
    regions.write_text("customer,region\nann,north\nbob,south\n", encoding="utf-8")
    for data in (BRONZE, json.loads(json.dumps(SILVER).replace("REGIONS", str(regions))), GOLD):
        write_spec(lake.pipelines_dir, data)
    store = ObjectStore.from_env().arrow()
    for day, lines in ((1, [order(1, 1, 9, "ann", 10.0), order(2, 1, 10, "bob", 20.0)]),
                       (2, [order(3, 2, 9, "ann", 7.0)]), (3, [order(4, 3, 5, "bob", 2.0)])):
        with store.open_output_stream(f"{bucket}/chain/lake/landing/orders/dt=2026-11-{day:02d}/a.json") as out:
            out.write(("\n".join(lines) + "\n").encode())

    # every run in-process, the same runner as a driver's: that a driver reaches the bucket through its
    # environment is test_a_pipeline_with_its_lake_and_checkpoints_in_a_bucket_takes_each_record_once's, and the
    # CLI's backfill flags are test_cli_corrections.py's
    for name in ("bronze", "silver", "gold"):
        here(name)
    fixed = write_spec(lake.pipelines_dir, {**BRONZE, "transform": {"sql": TIMES_TEN}})
    backfill = run_request(load_spec(fixed), mode="backfill", backfill_from="2026-11-01",
                           backfill_to="2026-11-02").backfill
    assert here("bronze", backfill=backfill)["backfill"]["slice"] == "2026-11-01..2026-11-02"
    here("silver")  # the rebuilds down the chain, in-process: the same runner as a driver's
    follow = here("gold")["upstream_changes"]
    assert (follow["pipeline"], follow["action"], [r["slice"] for r in follow["rebuilds"]]) == (
        "silver", "rebuild", ["2026-11-01..2026-11-02"])
    assert _read(f"{root}/lake/silver", "id", "day", "region", "amount") == [
        (1, 1, "north", 100.0), (2, 1, "south", 200.0), (3, 2, "north", 70.0), (4, 3, "south", 2.0)]
    assert _read(f"{root}/lake/gold", "day", "region", "orders", "revenue") == [
        (1, "north", 1, 100.0), (1, "south", 1, 200.0), (2, "north", 1, 70.0)]


def _read(uri: str, *columns: str) -> list[tuple]:
    from deltalake import DeltaTable

    from sluice.storage.object_store import delta_rs_location

    location, options = delta_rs_location(uri)
    table = DeltaTable(location, storage_options=options).to_pyarrow_table(columns=list(columns))
    values = [[v.day if hasattr(v, "day") else v for v in table[c].to_pylist()] for c in columns]
    return sorted(zip(*values))


def test_kafka_into_a_table_in_a_bucket_takes_each_record_once(bucket, aws_env, lake, monkeypatch, kafka_broker,
                                                                here, shared_driver):
    """Kafka -> Delta with the table, its quarantine and its checkpoint (the offsets) in the bucket: the first run
    in-process (``here``), the second a `sluice run` process that resumes from the offsets in the bucket."""
    from devservices.kafka_broker import create_topic
    from tests.e2e.conftest import last_json_line, sluice
    from tests.helpers import kafka_spec, produce, write_spec

    root = f"s3a://{bucket}/kafka"
    monkeypatch.setenv("SLUICE_LAKE_ROOT", f"{root}/lake")
    monkeypatch.setenv("SLUICE_CHECKPOINT_ROOT", f"{root}/checkpoints")
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, "s3_orders", partitions=2)
    write_spec(lake.pipelines_dir, kafka_spec("s3_orders", bootstrap, "s3_orders"))
    produce(bootstrap, "s3_orders", range(0, 6), bad_values=["not json"])
    first = here("s3_orders")
    assert (first["output_rows"], first["quarantined_rows"]) == (6, 1)
    produce(bootstrap, "s3_orders", range(6, 9))
    second = sluice("run", "s3_orders")
    assert second.returncode == 0 and last_json_line(second.stdout)["input_rows"] == 3, second.stderr[-3000:]
    assert _read(f"{root}/lake/s3_orders", "id", "amount") == [(i, i * 0.5) for i in range(9)]
    assert len(_read(f"{root}/lake/_quarantine/s3_orders", "raw")) == 1


def test_a_driver_paused_past_its_lease_commits_nothing_and_the_next_run_takes_each_record_once(
        bucket, aws_env, lake, monkeypatch, here):
    """A real `sluice run` driver stopped (SIGSTOP) once it holds its lease, for longer than the lease: another
    run takes the lock over; the driver, resumed, refuses its Delta commit ("lost its lock") and the run fails.
    The next run ingests every record once."""
    from tests.e2e.conftest import BIN, last_json_line
    from tests.helpers import write_spec

    root, lease = f"s3a://{bucket}/paused", 6
    monkeypatch.setenv("SLUICE_LAKE_ROOT", f"{root}/lake")
    monkeypatch.setenv("SLUICE_CHECKPOINT_ROOT", f"{root}/checkpoints")
    monkeypatch.setenv("SLUICE_LOCK_LEASE_SECONDS", str(lease))
    write_spec(lake.pipelines_dir, {"name": "orders", "source": {"format": "json", "path": "landing/orders",
                                                                 "schema": "id BIGINT, amount DOUBLE"},
                                    "sink": {"path": "bronze/orders"}})
    _land(bucket, "paused/lake/landing/orders/a.json", range(0, 5))
    lock_key = "paused/checkpoints/_locks/orders.driver.lock"
    run = subprocess.Popen([str(BIN / "sluice"), "run", "orders"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=dict(os.environ), stdin=subprocess.DEVNULL)
    try:
        deadline, driver = time.monotonic() + 180, None
        while driver is None and time.monotonic() < deadline and run.poll() is None:
            text = filesystem_text(bucket, lock_key)  # the driver's lease: its holder names the driver's pid
            driver = json.loads(text)["pid"] if text else None
            time.sleep(0.1)
        assert driver is not None, run.communicate()[1][-3000:]
        os.kill(driver, 19)  # SIGSTOP: the driver neither renews its lease nor commits
        taker = driver_lock(f"{root}/checkpoints", "orders", {"run_id": "taker"}, lease_seconds=lease)
        taker.wait_seconds = 60
        taker.acquire()  # once the lease has run out
        os.kill(driver, 18)  # SIGCONT
        out, err = run.communicate(timeout=300)
        taker.release()
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, err[-3000:]
    summary = last_json_line(out)
    assert "this run of pipeline orders lost its lock" in summary["error"], summary["error"]
    assert summary["output_rows"] == 0, summary
    assert DeltaLog.open(f"{root}/lake/bronze/orders") is None or \
        _read(f"{root}/lake/bronze/orders", "id", "amount") == []  # nothing committed by the paused driver
    assert here("orders")["output_rows"] == 5  # the next run (in-process): every record, once
    assert _read(f"{root}/lake/bronze/orders", "id", "amount") == [(i, i * 1.5) for i in range(5)]


def test_merge_reset_and_maintenance_of_a_table_in_a_bucket(bucket, aws_env, lake, monkeypatch, here, shared_driver):
    """A MERGE sink (the latest row per key), a reset (the old checkpoint set aside in the bucket, the table
    replaced from everything the source holds) and maintenance (OPTIMIZE compacts, VACUUM deletes the files
    it replaced) with the table and checkpoint in the bucket."""
    from tests.e2e.conftest import last_json_line, sluice
    from tests.helpers import write_spec

    root = f"s3a://{bucket}/merge"
    monkeypatch.setenv("SLUICE_LAKE_ROOT", f"{root}/lake")
    monkeypatch.setenv("SLUICE_CHECKPOINT_ROOT", f"{root}/checkpoints")
    write_spec(lake.pipelines_dir, {
        "name": "latest", "source": {"format": "json", "path": "landing", "schema": "id BIGINT, amount DOUBLE"},
        "sink": {"path": "silver/latest", "mode": "merge", "keys": ["id"]},
        "maintenance": {"vacuum_retention_hours": 0, "force_retention": True}})

    def run(*args: str) -> dict:
        done = sluice(*args)
        assert done.returncode == 0, done.stderr[-3000:]
        return last_json_line(done.stdout)

    _land(bucket, "merge/lake/landing/a.json", range(0, 4))
    here("latest")  # the runs and the reset in-process; maintenance: a `sluice maintain` process
    with ObjectStore.from_env().arrow().open_output_stream(f"{bucket}/merge/lake/landing/b.json") as out:
        out.write("".join(json.dumps({"id": i, "amount": 100.0 + i}) + "\n" for i in (1, 2, 9)).encode())
    here("latest")
    latest = [(0, 0.0), (1, 101.0), (2, 102.0), (3, 4.5), (9, 109.0)]
    assert _read(f"{root}/lake/silver/latest", "id", "amount") == latest

    reset = here("latest", reset=True, max_files_per_trigger=1)  # the files in order
    assert reset["input_rows"] == 7 and _read(f"{root}/lake/silver/latest", "id", "amount") == latest
    aside = [e.name for e in Storage(f"{root}/checkpoints").list() if e.name.startswith("latest.")]
    assert len(aside) == 1 and Storage(f"{root}/checkpoints/{aside[0]}").is_file("metadata"), aside

    _land(bucket, "merge/lake/landing/c.json", range(20, 22))  # new keys only: a file of their own
    here("latest")
    latest += [(20, 30.0), (21, 31.5)]
    maintained = run("maintain", "latest")
    sink = maintained["tables"]["sink"]
    assert sink["optimize"]["files_removed"] >= 2 and sink["vacuum"]["files_deleted"] >= 2, sink
    assert _read(f"{root}/lake/silver/latest", "id", "amount") == latest


def test_a_landing_object_rewritten_after_it_was_ingested_is_seen_and_reingested_once(bucket, aws_env, lake,
                                                                                      monkeypatch, here, shared_driver):
    """source.on_overwrite in a bucket: the object's Last-Modified against the time Spark's source log holds
    (to the second), its copy staged in the bucket, ingested once by the companion query. The run that sees the
    rewrite is a `sluice run` process; the ones before and after it are made in-process (``here``)."""
    from tests.e2e.conftest import last_json_line, sluice
    from tests.helpers import write_spec

    root = f"s3a://{bucket}/rewritten"
    monkeypatch.setenv("SLUICE_LAKE_ROOT", f"{root}/lake")
    monkeypatch.setenv("SLUICE_CHECKPOINT_ROOT", f"{root}/checkpoints")
    write_spec(lake.pipelines_dir, {
        "name": "corrected", "source": {"format": "json", "path": "landing", "schema": "id BIGINT, amount DOUBLE",
                                        "on_overwrite": "reingest"},
        "sink": {"path": "silver/corrected", "mode": "merge", "keys": ["id"]}})

    def run() -> dict:
        done = sluice("run", "corrected")
        assert done.returncode == 0, done.stderr[-3000:]
        return last_json_line(done.stdout)

    _land(bucket, "rewritten/lake/landing/a.json", range(0, 3))
    _land(bucket, "rewritten/lake/landing/b.json", range(3, 5))
    first = here("corrected")
    assert first["overwritten_files"] == {"checked": True, "count": 0, "paths": [], "action": "reingest"}
    assert first["input_rows"] == 5
    time.sleep(1.2)  # Last-Modified is kept to the second: the rewrite lands in a later one
    with ObjectStore.from_env().arrow().open_output_stream(f"{bucket}/rewritten/lake/landing/a.json") as out:
        out.write("".join(json.dumps({"id": i, "amount": 100.0 + i}) + "\n" for i in (1, 2, 7)).encode())
    second = run()
    rewritten = second["overwritten_files"]
    assert (rewritten["checked"], rewritten["count"], rewritten["copied"]) == (True, 1, 1), rewritten
    assert rewritten["paths"] == [f"{root}/lake/landing/a.json"]
    assert second["reingest"]["input_rows"] == 3, second["reingest"]
    assert _read(f"{root}/lake/silver/corrected", "id", "amount") == [
        (0, 0.0), (1, 101.0), (2, 102.0), (3, 4.5), (4, 6.0), (7, 107.0)]
    # the copy ingested is deleted from the bucket; the version stays known: not reported or taken again
    assert Storage(f"{root}/checkpoints/corrected/reingest/files").walk_files() == []
    third = here("corrected")
    assert (third["input_rows"], third["overwritten_files"]["count"]) == (0, 0), third
