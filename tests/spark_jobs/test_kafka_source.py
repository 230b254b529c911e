"""Kafka topics into Delta on a real broker: exactly the new records each run, offsets in the checkpoint."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from devservices.kafka_broker import (
    free_port,
    restart_broker,
    start_broker,
    stop_broker,
)
from sluice.contract import run_job
from sluice.settings import load_settings
from spark_jobs.run import backlog
from spark_jobs.run.runner import RunFailed, run_pipeline
from tests.helpers import (
    delta_version,
    end_offsets,
    kafka_spec,
    make_spec,
    new_topic,
    produce,
)

NOT_ASKED = {"source": "kafka", "measured_in_s": 0.0,
             "error": "not measured: the run failed because its Kafka brokers did not answer (see its error)"}


def run(spark, spec, lake, **options):
    return run_pipeline(spark, spec, lake, run_job(trigger=spec.trigger, run_id="t", write_ledger=False, **options)).to_json()


def table(spark, spec, lake):
    return spark.read.format("delta").load(spec.sink_path(lake))


def ids(spark, spec, lake) -> list[int]:
    return sorted(r.id for r in table(spark, spec, lake).select("id").collect())


def test_runs_ingest_exactly_the_new_records_with_per_partition_offsets(spark, lake, kafka_broker, monkeypatch):
    from spark_jobs.run import head_start

    warmed = []  # Delta's state of the table computed beside the query once the backlog says records wait

    def warm_state(session, path):
        warmed.append(path)
        real_warm_state(session, path)

    real_warm_state = head_start.warm_state
    monkeypatch.setattr(head_start, "warm_state", warm_state)
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=3)
    spec = make_spec(kafka_spec("k_incremental", bootstrap, topic))
    produce(bootstrap, topic, range(0, 30))

    first = run(spark, spec, lake)
    assert (first["batches"], first["input_rows"], first["output_rows"]) == (1, 30, 30)
    source = first["micro_batches"][0]["sources"][0]
    assert source["start_offset"] is None  # first run: earliest
    after_first = end_offsets(bootstrap, topic)
    assert source["end_offset"] == {topic: after_first}
    assert sum(after_first.values()) == 30 and all(n > 0 for n in after_first.values())

    second = run(spark, spec, lake)
    assert (second["batches"], second["input_rows"]) == (0, 0)
    assert second["delta_version_before"] == second["delta_version_after"] == 0
    assert delta_version(spec.sink_path(lake)) == 0  # no new Delta commit, as delta-rs reads the table

    assert warmed == []  # no table before the first run; nothing waiting before the second

    produce(bootstrap, topic, range(30, 42))
    third = run(spark, spec, lake)
    assert (third["input_rows"], third["delta_version_after"]) == (12, 1)
    assert third["backlog_before"]["offsets"] == 12
    deadline = time.monotonic() + 10  # the measurement's callback starts it after handing its result over
    while not warmed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert warmed == [spec.sink_path(lake)]
    source = third["micro_batches"][0]["sources"][0]
    assert source["start_offset"] == {topic: after_first}
    assert source["end_offset"] == {topic: end_offsets(bootstrap, topic)}
    assert ids(spark, spec, lake) == list(range(42))
    row = table(spark, spec, lake).where("id = 7").first()
    assert (row.key, row.topic, row.amount, row._rescued) == ("7", topic, 3.5, None)
    assert row.partition in (0, 1, 2) and row.offset >= 0 and row.timestamp is not None


def test_max_offsets_per_trigger_runs_several_batches_and_still_reads_everything(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    spec = make_spec(kafka_spec("k_rate", bootstrap, topic, max_offsets_per_trigger=20))
    produce(bootstrap, topic, range(100))
    summary = run(spark, spec, lake)
    assert summary["batches"] >= 5
    assert summary["input_rows"] == 100
    assert ids(spark, spec, lake) == list(range(100))


def test_batch_replayed_after_crash_between_commits_adds_no_duplicates(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    spec = make_spec(kafka_spec("k_replay", bootstrap, topic))
    produce(bootstrap, topic, range(10))
    run(spark, spec, lake)
    produce(bootstrap, topic, range(10, 25))
    run(spark, spec, lake)
    checkpoint = Path(spec.checkpoint_path(lake))
    (checkpoint / "commits" / "1").unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)

    replay = run(spark, spec, lake)

    assert replay["skipped_batches"] == [1]
    assert replay["delta_version_before"] == replay["delta_version_after"] == 1
    assert delta_version(spec.sink_path(lake)) == 1
    assert ids(spark, spec, lake) == list(range(25))


def test_values_that_are_not_valid_json_go_to_quarantine_with_topic_partition_offset(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    spec = make_spec(kafka_spec("k_bad", bootstrap, topic))
    produce(bootstrap, topic, range(3), bad_values=["{truncated", '{"id": "not a number", "amount": 1}', "42",
                                                    '{"id": 9, "amount": 1, "coupon": "X1"}'])
    summary = run(spark, spec, lake)
    assert summary["input_rows"] == 7
    assert (summary["bad_records"], summary["quarantined_rows"], summary["rescued_rows"]) == (3, 3, 1)
    assert summary["output_rows"] == 4
    quarantine = spark.read.format("delta").load(spec.quarantine_table_path(lake))
    bad = {r.source: (r.raw, r.error, r.pipeline, r.run_id, r.batch_id) for r in quarantine.collect()}
    assert bad == {
        f"{topic}/0/3": ("{truncated", "not a JSON object (malformed, truncated, or not {...})", "k_bad", "t", 0),
        f"{topic}/0/4": ('{"id": "not a number", "amount": 1}', "field(s) that do not fit the schema: id BIGINT",
                         "k_bad", "t", 0),
        f"{topic}/0/5": ("42", "not a JSON object (malformed, truncated, or not {...})", "k_bad", "t", 0),
    }
    rows = {r.id: (r.amount, r.key, r._rescued) for r in table(spark, spec, lake).collect()}
    assert rows == {0: (0.0, "0", None), 1: (0.5, "1", None), 2: (1.0, "2", None), 9: (1.0, "bad3", '{"coupon":"X1"}')}


def test_missing_topic_is_a_clear_error(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    spec = make_spec(kafka_spec("k_missing", bootstrap, "no_such_topic"))
    with pytest.raises(RunFailed, match=rf"^topic\(s\) no_such_topic do not exist on {bootstrap} \(existing topics: "):
        run(spark, spec, lake)


def test_bad_bootstrap_address_is_a_clear_error(spark, lake):
    spec = make_spec(kafka_spec("k_badhost", "no-such-host.invalid:9092", "t"))
    with pytest.raises(RunFailed) as caught:
        run(spark, spec, lake)
    assert str(caught.value).startswith("cannot use the Kafka bootstrap servers 'no-such-host.invalid:9092'")
    assert "No resolvable bootstrap urls" in str(caught.value)
    # the backlog is not waited for (its measurement would take the whole timeout), nor measured after
    summary = caught.value.summary.to_json()
    assert (summary["backlog_before"], summary["backlog_after"]) == (NOT_ASKED, NOT_ASKED)


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory):
    """A broker of these tests' own, to stop and start without disturbing the others' (each test that stops it
    starts it again before it ends)."""
    broker = start_broker(tmp_path_factory.mktemp("own-broker") / "broker", load_settings().jars_dir)
    yield broker
    stop_broker(broker)


def test_the_backlog_before_a_run_is_measured_beside_the_querys_start(lake):
    """A broker that does not answer: the measurement is under way when before_query returns (the query starts
    at once) and says why it found nothing once the query is done."""
    spec = make_spec(kafka_spec("k_beside", f"127.0.0.1:{free_port()}", "t", timeout_seconds=3))
    started = backlog.before_query(spec, lake)
    assert isinstance(started, Future) and not started.done()
    measured = backlog.after_query(spec, lake, None, started)
    assert measured["source"] == "kafka" and measured["measured_in_s"] >= 3
    assert measured["error"].startswith(f"Kafka broker unreachable at {spec.source.bootstrap_servers}: ")


@pytest.mark.slow  # a broker of its own stopped and started again: not in make test-fast
def test_broker_down_at_start_fails_fast_then_the_next_run_catches_up(spark, lake, own_broker):
    restart_broker(own_broker, lake.jars_dir)  # up, whatever an earlier test left
    bootstrap = own_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    spec = make_spec(kafka_spec("k_down", bootstrap, topic, timeout_seconds=5))
    produce(bootstrap, topic, range(20))
    run(spark, spec, lake)
    produce(bootstrap, topic, range(20, 30))
    stop_broker(own_broker, crash=True)  # down, however it went: a graceful stop only takes longer

    started = time.monotonic()
    with pytest.raises(RunFailed) as caught:
        run(spark, spec, lake)
    assert time.monotonic() - started < 30
    assert str(caught.value).startswith(f"Kafka broker unreachable at {bootstrap}: no answer within 5s")
    # the broker is asked for the backlog before the run beside the query's own check (one timeout, not two:
    # whichever ends first), and not asked again after it
    summary = caught.value.summary.to_json()
    before = summary["backlog_before"]
    assert before == NOT_ASKED or before["error"].startswith(f"Kafka broker unreachable at {bootstrap}: "), before
    assert "offsets" not in before and summary["backlog_after"] == NOT_ASKED

    restart_broker(own_broker, lake.jars_dir)
    assert run(spark, spec, lake)["input_rows"] == 10
    assert ids(spark, spec, lake) == list(range(30))


@pytest.mark.slow  # a broker of its own stopped and started again: not in make test-fast
def test_broker_stopped_mid_run_fails_in_bounded_time_and_loses_nothing(spark, lake, own_broker):
    restart_broker(own_broker, lake.jars_dir)  # up, whatever an earlier test left
    bootstrap = own_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    spec = make_spec(kafka_spec("k_midrun", bootstrap, topic, timeout_seconds=5, max_offsets_per_trigger=60))
    produce(bootstrap, topic, range(600))
    commits = Path(spec.checkpoint_path(lake)) / "commits"
    stopped = threading.Event()

    def stop_after_two_batches():
        deadline = time.monotonic() + 120
        while not (commits / "1").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        stop_broker(own_broker, crash=True)  # at once: a graceful shutdown could outlast the run
        stopped_at.append(time.monotonic())
        stopped.set()

    stopped_at: list[float] = []
    threading.Thread(target=stop_after_two_batches, daemon=True).start()
    with pytest.raises(RunFailed) as caught:
        run(spark, spec, lake)
    failed_after = time.monotonic() - stopped_at[0]
    assert stopped.is_set()
    # docs/kafka.md's bound, "about three timeout_seconds", with a generous margin for a busy machine: a run that
    # hung on the lost broker (Spark's own default waits far longer) fails this
    assert failed_after < 3 * 5 + 45, f"the run failed {failed_after:.0f} s after the broker was lost"
    assert "Kafka broker unreachable at" in str(caught.value)
    assert "during the run" in str(caught.value)
    assert caught.value.summary.to_json()["backlog_after"] == NOT_ASKED
    partial = len(ids(spark, spec, lake))
    assert 0 < partial < 600

    restart_broker(own_broker, lake.jars_dir)
    run(spark, spec, lake)
    assert ids(spark, spec, lake) == list(range(600))  # every record exactly once


def test_records_lost_to_retention_fail_the_run_unless_the_gap_is_accepted(spark, lake, kafka_broker):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    spec = make_spec(kafka_spec("k_loss", bootstrap, topic))
    produce(bootstrap, topic, range(10))
    run(spark, spec, lake)
    produce(bootstrap, topic, range(10, 20))
    # retention deletes offsets 10-14 before the pipeline read them
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until its futures resolve
    futures = admin.delete_records([TopicPartition(topic, 0, 15)])
    for future in futures.values():
        future.result(timeout=30)

    with pytest.raises(RunFailed) as caught:
        run(spark, spec, lake)
    assert str(caught.value).startswith(f"records are missing from Kafka at {bootstrap}")
    assert "fail_on_data_loss: false" in str(caught.value)
    assert ids(spark, spec, lake) == list(range(10))  # nothing written by the failed run

    accepting = make_spec(kafka_spec("k_loss", bootstrap, topic, fail_on_data_loss=False))
    assert run(spark, accepting, lake)["input_rows"] == 5
    assert ids(spark, spec, lake) == [*range(10), *range(15, 20)]


def test_backfill_rebuilds_a_day_from_the_committed_records_of_that_day(spark, lake, kafka_broker):
    import json
    from datetime import date, datetime, timezone

    from confluent_kafka import Producer

    from sluice.contract.request import run_request

    topic = new_topic(kafka_broker.bootstrap_servers)
    spec_data = kafka_spec("kafka_days", kafka_broker.bootstrap_servers, topic)
    spec_data["transform"] = {"sql": "SELECT id, amount, to_date(timestamp) AS day FROM source"}
    spec_data["backfill"] = {"column": "day"}
    spec = make_spec(spec_data)

    def send(ids, day: int) -> None:
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
        ms = int(datetime(2026, 11, day, 12, tzinfo=timezone.utc).timestamp() * 1000)
        for i in ids:
            producer.produce(topic, key=str(i), value=json.dumps({"id": i, "amount": 1.0}), timestamp=ms)
        assert producer.flush(30) == 0

    send(range(0, 4), day=1)
    send(range(4, 7), day=2)
    run(spark, spec, lake)
    send(range(7, 9), day=1)  # late records of the 1st, not ingested yet: the next incremental run's
    fixed = make_spec({**spec_data, "transform": {"sql": "SELECT id, amount * 10 AS amount, to_date(timestamp) AS day "
                                                         "FROM source"}})
    slice_ = run_request(fixed, mode="backfill", backfill_from="2026-11-01", backfill_to="2026-11-01").backfill

    for _ in range(2):  # twice: the same table
        summary = run(spark, fixed, lake, backfill=slice_)
        assert (summary["input_rows"], summary["output_rows"]) == (4, 4)
        got = sorted((r.id, r.amount, r.day) for r in table(spark, spec, lake).collect())
        assert got == [*[(i, 10.0, date(2026, 11, 1)) for i in range(4)],
                       *[(i, 1.0, date(2026, 11, 2)) for i in range(4, 7)]]
    assert sum(summary["backfill"]["kafka"]["ending_offsets"][topic].values()) == 7  # what the stream committed
    run(spark, fixed, lake)  # the late records, once
    assert ids(spark, spec, lake) == list(range(9))


# --- docs/kafka.md's promises, each in a run on the real broker ------------------------------------------

def test_subscribe_pattern_reads_every_matching_topic(spark, lake, kafka_broker):
    import uuid

    from devservices.kafka_broker import create_topic

    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"p_{uuid.uuid4().hex[:8]}"
    for suffix in ("a", "b"):
        create_topic(bootstrap, f"{prefix}_{suffix}", 1)
    produce(bootstrap, f"{prefix}_a", range(0, 5))
    produce(bootstrap, f"{prefix}_b", range(5, 12))
    data = kafka_spec("k_pattern", bootstrap, "unused")
    del data["source"]["topics"]
    data["source"]["subscribe_pattern"] = f"{prefix}_.*"
    spec = make_spec(data)
    summary = run(spark, spec, lake)
    assert summary["input_rows"] == 12
    assert ids(spark, spec, lake) == list(range(12))
    assert {r.topic for r in table(spark, spec, lake).select("topic").collect()} == {f"{prefix}_a", f"{prefix}_b"}


def test_starting_offsets_latest_reads_only_what_arrives_after_the_first_run(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    produce(bootstrap, topic, range(0, 10))
    spec = make_spec(kafka_spec("k_latest", bootstrap, topic, starting_offsets="latest"))
    assert run(spark, spec, lake)["input_rows"] == 0
    produce(bootstrap, topic, range(10, 15))
    assert run(spark, spec, lake)["input_rows"] == 5
    assert ids(spark, spec, lake) == list(range(10, 15))


def test_starting_offsets_per_partition_json(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, range(0, 10))
    spec = make_spec(kafka_spec("k_from4", bootstrap, topic, starting_offsets={topic: {"0": 4}}))
    summary = run(spark, spec, lake)
    assert summary["micro_batches"][0]["sources"][0]["end_offset"] == {topic: {"0": 10}}
    assert ids(spark, spec, lake) == list(range(4, 10))  # offsets 4..9 hold ids 4..9 (one partition)


def test_a_record_without_a_value_is_a_bad_record(spark, lake, kafka_broker):
    from confluent_kafka import Producer

    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, range(0, 3))
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key="tombstone", value=None)
    assert producer.flush(30) == 0
    spec = make_spec(kafka_spec("k_null", bootstrap, topic))
    summary = run(spark, spec, lake)
    assert (summary["input_rows"], summary["output_rows"], summary["quarantined_rows"]) == (4, 3, 1)
    (bad,) = spark.read.format("delta").load(spec.quarantine_table_path(lake)).collect()
    assert (bad.source, bad.raw) == (f"{topic}/0/3", None)
    assert bad.error == "the record has no value (null)"


def test_a_topic_deleted_and_created_again_is_data_loss_unless_accepted(spark, lake, kafka_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, range(0, 10))
    spec = make_spec(kafka_spec("k_recreated", bootstrap, topic))
    run(spark, spec, lake)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 60
    while True:  # the broker deletes a topic in the background: create it again once it is gone
        try:
            for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                future.result(timeout=30)
            break
        except Exception:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS while the deletion is under way
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    produce(bootstrap, topic, range(100, 104))

    with pytest.raises(RunFailed) as caught:
        run(spark, spec, lake)
    assert str(caught.value).startswith(f"records are missing from Kafka at {bootstrap}")
    assert "fail_on_data_loss: false" in str(caught.value)
    assert ids(spark, spec, lake) == list(range(10))

    # false skips the gap: the run goes on from where the new topic ends now (Spark: "offset was changed from
    # 10 to 4"), so what the new topic held at that run is skipped (docs/kafka.md); what arrives later flows
    accepting = make_spec(kafka_spec("k_recreated", bootstrap, topic, fail_on_data_loss=False))
    skipped = run(spark, accepting, lake)
    assert skipped["input_rows"] == 0
    assert skipped["micro_batches"][0]["sources"][0]["end_offset"] == {topic: {"0": 4}}
    produce(bootstrap, topic, range(200, 203))
    assert run(spark, accepting, lake)["input_rows"] == 3
    assert ids(spark, spec, lake) == [*range(10), *range(200, 203)]
