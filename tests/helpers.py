"""Small builders for test inputs (landing files, specs, Kafka records) and oracles that are not the
product (checkpoint fingerprints, Delta versions read by delta-rs, files left behind)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml

from sluice.spec import PipelineSpec, parse_spec

ORDERS_SCHEMA = "id BIGINT, ts TIMESTAMP, customer STRING, amount DOUBLE"


def write_lines(path: Path, lines: list[str]) -> Path:
    """Write a landing file atomically (a file source must never see it half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    tmp.replace(path)
    return path


def order_lines(ids: range) -> list[str]:
    return [json.dumps({"id": i, "ts": f"2026-11-0{1 + i % 3}T10:00:00Z", "customer": f"c{i % 7}", "amount": i * 1.5})
            for i in ids]


def write_orders(folder: Path, name: str, ids: range) -> Path:
    return write_lines(folder / name, order_lines(ids))


def orders_spec(**overrides: Any) -> dict[str, Any]:
    spec = {
        "name": "orders",
        "source": {"format": "json", "path": "landing/orders", "schema": ORDERS_SCHEMA},
        "sink": {"path": "bronze/orders"},
    }
    spec.update(overrides)
    return spec


def make_spec(data: dict[str, Any]) -> PipelineSpec:
    return parse_spec(data, "test-spec")


def write_spec(folder: Path, data: dict[str, Any], filename: str | None = None) -> Path:
    path = folder / (filename or f"{data['name']}.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def tree_digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden .crc files included) by relative path -> sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def delta_version(path: Path | str) -> int | None:
    """The table's latest version as delta-rs reads it, or None if there is no Delta table at ``path``.

    An oracle that is not the product: sluice fills the run summary's versions with its own ``_delta_log``
    reader (``spark_jobs.sinks.delta_table``), so "no new Delta commit" is checked with another implementation."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(path)).version()
    except TableNotFoundError:
        return None


def files_under(roots: list[Path]) -> set[Path]:
    """Every file and folder under ``roots`` (hidden ones included), to compare with :func:`new_files_since`."""
    return {p for root in roots if root.exists() for p in root.rglob("*")}


def new_files_since(roots: list[Path], snapshot: set[Path], expected: tuple[Path, ...] = ()) -> list[Path]:
    """What appeared under ``roots`` since ``snapshot`` (of :func:`files_under`) and is still there: any name,
    any depth -- not only folders with the product's own scratch prefix. Except what the run is meant to write:
    the folders in ``expected`` (e.g. the run ledger, where a dry run is recorded too), their content and the
    folders leading to them."""
    expected = tuple(Path(p) for p in expected)
    return sorted(p for p in files_under(roots) - snapshot
                  if not any(p == e or p in e.parents or e in p.parents for e in expected))


def own_temp_dir(monkeypatch, tmp_path: Path) -> Path:
    """Make the temp dir of the runs this test starts its own: ``tempfile.tempdir`` for an in-process run,
    ``TMPDIR`` for a ``sluice`` subprocess (and its driver). The machine's temp dir is shared: other
    processes -- other test runs of these same tests included -- create entries there at any moment, even with
    the product's prefix, so no rule over it tells the run's leftovers from theirs. Only the run writes here,
    so ANY entry left under it after the run is the run's. (The in-process Spark JVM's ``java.io.tmpdir`` is
    set when the test session starts and is not redirected.)"""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def new_topic(bootstrap: str, partitions: int = 3) -> str:
    """A fresh topic with a unique name."""
    import uuid

    from devservices.kafka_broker import create_topic

    name = f"t_{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, name, partitions)
    return name


def produce(bootstrap: str, topic: str, ids: range, bad_values: list[str] = ()) -> None:
    """Records {"id": i, "amount": ...} keyed by id (spread over the partitions), then any raw bad values."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in ids:
        producer.produce(topic, key=str(i), value=json.dumps({"id": i, "amount": i * 0.5}))
    for n, value in enumerate(bad_values):
        producer.produce(topic, key=f"bad{n}", value=value)
    assert producer.flush(30) == 0


def end_offsets(bootstrap: str, topic: str) -> dict[str, int]:
    """The broker's high watermark of every partition, as Spark writes offsets: {"0": n, ...}."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-tests"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {str(p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def kafka_spec(name: str, bootstrap: str, topic: str, **source: Any) -> dict[str, Any]:
    return {
        "name": name,
        "source": {"format": "kafka", "bootstrap_servers": bootstrap, "topics": [topic], "timeout_seconds": 10,
                   "value": {"format": "json", "schema": "id BIGINT, amount DOUBLE"}, **source},
    }


def run_here(spark, settings, spec_path: Path, **job: Any) -> dict[str, Any]:
    """A run in the test's own SparkSession, as the driver makes it after spark-submit (spark_jobs.driver.job): the spec
    read from its file, the run's lock, checkpoint, table and ledger row all the product's. For the set-up runs
    of tests whose subject is a later process (`sluice show`, `maintain`, a restarted run): one spark-submit per
    process-boundary behaviour is kept where that boundary is what is tested."""
    from sluice.contract import run_job
    from sluice.spec import load_spec
    from spark_jobs.run.runner import RunFailed, run_pipeline

    request = run_job(spec_path=str(spec_path), run_id=job.pop("run_id", "set-up"), **job)
    try:
        return run_pipeline(spark, load_spec(spec_path), settings, request).to_json()
    except RunFailed as failed:
        return failed.summary.to_json()


def ran_here(spark, settings, name: str, **job: Any) -> dict[str, Any]:
    """:func:`run_here` of the spec ``<name>.yaml`` of ``settings``' pipelines folder, which must succeed (a
    set-up run, or the run after a kill); its summary."""
    done = run_here(spark, settings, settings.pipelines_dir / f"{name}.yaml", **job)
    assert done["status"] == "succeeded", done["error"]
    return done
