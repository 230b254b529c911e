"""A Kafka pipeline's backlog against the real broker: per partition, the latest offset minus where the
checkpoint's last committed batch ended (sluice.operations.backlog, no Spark): from checkpoints real runs wrote, as each run
summary's backlog_before / backlog_after, and from a hand-made one with a batch planned but not committed."""

from __future__ import annotations

import pytest

from devservices.kafka_broker import create_topic
from sluice.contract import run_job
from sluice.operations.backlog import describe, kafka_backlog, measure
from sluice.spec import load_spec
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.run.runner import run_pipeline
from tests.helpers import write_spec
from tests.sluice.test_backlog import _checkpoint


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in per_partition.items():
        for n in range(count):
            producer.produce(topic, value=f'{{"id": {n}}}', partition=partition)
    assert producer.flush(30) == 0


def test_kafka_backlog_is_the_lag_of_each_partition_behind_the_checkpoint(kafka_broker, lake, tmp_path):
    bootstrap, topic = kafka_broker.bootstrap_servers, "backlog_orders"
    create_topic(bootstrap, topic, 3)
    _produce(bootstrap, topic, {0: 5, 1: 2, 2: 0})
    write_spec(lake.pipelines_dir, {"name": "orders", "source": {
        "format": "kafka", "bootstrap_servers": bootstrap, "topics": [topic],
        "value": {"format": "json", "schema": "id BIGINT"}}})
    spec = load_spec(lake.pipelines_dir / "orders.yaml")
    # never run: everything from the earliest offset waits
    never = measure(spec, lake)
    assert (never["source"], never["offsets"], never["partitions"]) == (
        "kafka", 7, {f"{topic}/0": 5, f"{topic}/1": 2, f"{topic}/2": 0})
    assert describe(never) == "7 offsets in 2 partition(s)"
    # batch 1 planned (offsets/1) but not committed: the backlog counts from the end of batch 0
    checkpoint = _checkpoint(tmp_path / "cp", offsets={0: {topic: {"0": 3, "1": 2, "2": 0}},
                                                      1: {topic: {"0": 5, "1": 2, "2": 0}}}, done=0)
    assert kafka_backlog(spec.source, checkpoint)["partitions"] == {f"{topic}/0": 2, f"{topic}/1": 0, f"{topic}/2": 0}
    _produce(bootstrap, topic, {2: 4})
    assert kafka_backlog(spec.source, checkpoint)["offsets"] == 6
    # starting_offsets latest: a pipeline that never ran has nothing waiting
    latest = spec.source.model_copy(update={"starting_offsets": "latest"})
    assert kafka_backlog(latest, Checkpoint(str(tmp_path / "none")))["offsets"] == 0


def test_the_kafka_backlog_of_a_checkpoint_that_spark_wrote_counts_what_arrived_after_the_run(kafka_broker, lake,
                                                                                           spark):
    bootstrap, topic = kafka_broker.bootstrap_servers, "backlog_real"
    create_topic(bootstrap, topic, 3)
    _produce(bootstrap, topic, {0: 5, 1: 2, 2: 0})
    write_spec(lake.pipelines_dir, {"name": "real", "source": {
        "format": "kafka", "bootstrap_servers": bootstrap, "topics": [topic], "timeout_seconds": 10,
        "value": {"format": "json", "schema": "id BIGINT"}}})
    spec = load_spec(lake.pipelines_dir / "real.yaml")

    def run(trigger: str) -> dict:
        return run_pipeline(spark, spec, lake, run_job(trigger=trigger, run_id=trigger)).to_json()

    first = run("available_now")
    assert (first["status"], first["input_rows"]) == ("succeeded", 7)
    counted = lambda backlog: {k: backlog[k] for k in ("source", "offsets", "partitions")}  # noqa: E731
    assert counted(first["backlog_before"]) == {"source": "kafka", "offsets": 7,
                                                "partitions": {f"{topic}/0": 5, f"{topic}/1": 2, f"{topic}/2": 0}}
    assert counted(first["backlog_after"]) == {"source": "kafka", "offsets": 0,
                                               "partitions": {f"{topic}/0": 0, f"{topic}/1": 0, f"{topic}/2": 0}}
    # what arrives after the run waits, counted from the offsets Spark committed in the checkpoint
    _produce(bootstrap, topic, {0: 1, 2: 4})
    checkpoint = Checkpoint(first["checkpoint"])
    assert checkpoint.last_offset() == {topic: {"0": 5, "1": 2, "2": 0}}
    waiting = measure(spec, lake)
    assert (waiting["offsets"], waiting["partitions"]) == (5, {f"{topic}/0": 1, f"{topic}/1": 0, f"{topic}/2": 4})
    assert describe(waiting) == "5 offsets in 2 partition(s)"
    second = run("once")
    assert (second["input_rows"], second["backlog_before"]["offsets"], second["backlog_after"]["offsets"]) == (5, 5, 0)
    assert measure(spec, lake)["offsets"] == 0


@pytest.mark.timeout(120)
def test_a_broker_that_does_not_answer_leaves_the_backlog_unknown_and_says_why(lake):
    from devservices.kafka_broker import free_port

    write_spec(lake.pipelines_dir, {"name": "orders", "source": {
        "format": "kafka", "bootstrap_servers": f"127.0.0.1:{free_port()}", "topics": ["t"],
        "value": {"format": "json", "schema": "id BIGINT"}}})
    found = measure(load_spec(lake.pipelines_dir / "orders.yaml"), lake, timeout_seconds=2)
    assert found["source"] == "kafka" and "offsets" not in found
    assert found["error"].startswith("Kafka broker unreachable at 127.0.0.1:"), found
