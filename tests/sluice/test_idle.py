"""The launcher's idle check without Spark (sluice.operations.idle): a run is idle only when every condition
holds, and each one that does not says why. The checkpoint and table are files as Spark and Delta leave them;
the end-to-end behaviour, on real runs, is tests/e2e/test_idle_runs.py."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from sluice.contract import run_job
from sluice.operations import idle
from sluice.operations.backlog import hidden
from sluice.settings import load_settings
from tests.helpers import make_spec, orders_spec
from tests.sluice.test_delta_log import _table


def test_hidden_names_are_the_ones_sparks_file_source_skips():
    assert [name for name in ("_SUCCESS", ".a.json.tmp", "a.json._COPYING_", "_temporary", "_dt=1", "_metadata",
                              "_common_metadata", "a.json", "dt=1") if hidden(name)] == [
        "_SUCCESS", ".a.json.tmp", "a.json._COPYING_", "_temporary"]


@pytest.fixture
def ran(lake):
    """A pipeline whose one batch read landing/orders/a.json, its table at version 1, and the marker of a run
    that ended well with its spec: idle as it stands."""
    spec = make_spec(orders_spec())
    landing = lake.lake_root / "landing" / "orders"
    landing.mkdir(parents=True)
    first = landing / "a.json"
    first.write_text('{"id": 1}\n')
    checkpoint = Path(spec.checkpoint_path(lake))
    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"5e1f-query"}')
    (checkpoint / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"logOffset":0}')
    (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    entry = {"path": f"file://{first}", "timestamp": first.stat().st_mtime_ns // 1_000_000, "batchId": 0,
             "size": first.stat().st_size}
    (checkpoint / "sources" / "0" / "0").write_text("v1\n" + json.dumps(entry))
    (checkpoint / "sluice.json").write_text(json.dumps({"pipeline": "orders", "query": {"stateful_query": None}}))
    table = _table(lake.lake_root / "bronze")
    assert table == lake.lake_root / "bronze" / "orders"
    idle.remember(idle.Checkpoint(str(checkpoint)), spec, lake, batch=0, delta_version=1)
    return spec, landing, checkpoint


def verdict(spec, settings, **job) -> tuple[bool, str]:
    found = idle.check(run_job(**job), spec, settings)
    return found.idle, found.why


def test_a_pipeline_with_nothing_new_is_idle_and_says_what_it_looked_at(ran, lake):
    spec, landing, checkpoint = ran
    found = idle.check(run_job(), spec, lake)
    assert (found.idle, found.why) == (True, "no new or changed file among 1 listed (1 read before)")
    assert found.facts == {"checkpoint_id": "5e1f-query", "delta_version": 1, "batch": 0, "files_known": 1,
                           "files_listed": 1}
    assert found.backlog == {"source": "files", "files": 0, "bytes": 0, "oldest_at": None}
    (landing / "_SUCCESS").write_text("")  # not input
    assert verdict(spec, lake) == (True, "no new or changed file among 1 listed (1 read before)")


def test_any_other_job_or_setting_starts_the_driver(ran, lake, monkeypatch):
    spec, _, _ = ran
    assert verdict(spec, lake, dry_run=True) == (False, "not an incremental run (dry_run)")
    assert verdict(spec, lake, reset=True) == (False, "not an incremental run (reset)")
    monkeypatch.setenv("SLUICE_IDLE_RUNS", "run")
    assert verdict(spec, load_settings()) == (False, "SLUICE_IDLE_RUNS=run")
    monkeypatch.setenv("SLUICE_TABLE_NAMES", "auto")
    monkeypatch.delenv("SLUICE_IDLE_RUNS")
    assert verdict(spec, load_settings()) == (False, "its tables have names in the catalog")


def test_new_changed_or_uncleaned_files_start_the_driver(ran, lake):
    spec, landing, _ = ran
    (landing / "b.json").write_text('{"id": 2}\n')
    assert verdict(spec, lake) == (False, f"a new file: {landing / 'b.json'}")
    (landing / "b.json").unlink()
    os.utime(landing / "a.json", (1_790_000_000, 1_790_000_000))
    assert verdict(spec, lake) == (False, f"a file changed since it was read: {landing / 'a.json'}")


def test_a_changed_spec_a_pending_batch_or_a_half_done_step_start_the_driver(ran, lake):
    spec, _, checkpoint = ran
    changed = make_spec(orders_spec(description="described"))
    assert verdict(changed, lake) == (False, "its last run that ended well had another spec")
    (checkpoint / "offsets" / "1").write_text('v1\n{"batchWatermarkMs":0}\n{"logOffset":1}')
    assert verdict(spec, lake) == (False, "batch 1 is planned and not done")
    (checkpoint / "offsets" / "1").unlink()
    (checkpoint / "state").mkdir()
    assert verdict(spec, lake) == (False, "its checkpoint holds state")
    shutil.rmtree(checkpoint / "state")
    (checkpoint / "sluice_upstream_pending").write_text("{}")
    assert verdict(spec, lake) == (False, "its checkpoint holds sluice_upstream_pending")
    (checkpoint / "sluice_upstream_pending").unlink()
    assert verdict(spec, lake)[0] is True
    # a batch done since the last run that ended well (one killed after its commits), or a table changed since
    (checkpoint / "offsets" / "1").write_text('v1\n{"batchWatermarkMs":0}\n{"logOffset":1}')
    (checkpoint / "commits" / "1").write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert verdict(spec, lake) == (False, "batch 1 is done since its last run that ended well")
    idle.remember(idle.Checkpoint(str(checkpoint)), spec, lake, batch=1, delta_version=0)
    assert verdict(spec, lake) == (False, "its table is at version 1 since its last run that ended well (at 0)")
    idle.remember(idle.Checkpoint(str(checkpoint)), spec, lake, batch=1, delta_version=1)
    assert verdict(spec, lake)[0] is True


def test_a_history_too_long_to_read_here_leaves_it_to_the_driver(ran, lake, monkeypatch):
    spec, _, checkpoint = ran
    size = (checkpoint / "sources" / "0" / "0").stat().st_size
    monkeypatch.setattr(idle, "LOG_BYTES", size - 1)
    assert verdict(spec, lake) == (False, f"a source log of {size} bytes: its driver's discovery is quicker")


def test_a_pipeline_no_run_recorded_or_a_kafka_client_of_java_settings_starts_the_driver(ran, lake):
    spec, _, checkpoint = ran
    (checkpoint / idle.MARKER).unlink()  # a pipeline whose last run was by a sluice before idle runs
    assert verdict(spec, lake) == (False, "no run that ended well recorded itself (sluice_idle.json)")
    kafka = make_spec({"name": "k", "source": {
        "format": "kafka", "bootstrap_servers": "127.0.0.1:1", "topics": ["t"],
        "options": {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/etc/ks.jks"},
        "value": {"format": "json", "schema": "id BIGINT"}}})
    assert verdict(kafka, lake) == (False, "its Kafka client needs kafka.ssl.truststore.location")


def test_an_incremental_listing_is_checked_after_the_drivers_mark(ran, lake):
    # source.listing: incremental: the names after the mark the driver's listing would start from, read from
    # the marks its index wrote; every name when the driver would list them all; the driver runs when its full
    # listing is due (it records when it made it)
    _, landing, checkpoint = ran
    spec = make_spec(orders_spec(source={**orders_spec()["source"], "listing": "incremental", "look_back": "1h"}))
    idle.remember(idle.Checkpoint(str(checkpoint)), spec, lake, batch=0, delta_version=1)
    found = idle.check(run_job(), spec, lake)
    assert (found.idle, found.why, found.facts["start_after"]) == (
        True, "no new or changed file among 1 listed (1 read before)", None)  # no mark yet: every name
    marks = checkpoint / "sources" / "0" / "index" / "marks"
    marks.parent.mkdir()
    hour, now = 3600 * 1000, int(time.time() * 1000)

    def marked(full_ms: int, *made: tuple[int, str]) -> None:
        marks.write_text(json.dumps({"root": f"file:{landing}", "full_ms": full_ms, "marks": [list(m) for m in made]}))

    marked(now - hour, (now - 2 * hour, "a.json"), (now - 1000, "a.json"))
    found = idle.check(run_job(), spec, lake)
    assert (found.idle, found.why) == (True, "no new or changed file among 0 listed (1 read before)")
    assert found.facts["start_after"] == "a.json"
    (landing / "0-late.json").write_text('{"id": 0}\n')  # below the mark: the driver's listing would not see it
    assert verdict(spec, lake)[0] is True
    (landing / "b.json").write_text('{"id": 2}\n')
    assert verdict(spec, lake) == (False, f"a new file: {landing}/b.json")
    marked(now - 2 * 24 * hour, (now - 2 * hour, "a.json"))  # a full listing is due: it reads the late file
    assert verdict(spec, lake) == (False, "a full listing is due (full_listing_every): the driver lists every name")
    (landing / "b.json").unlink()
    marked(now - hour, (now - 1000, "a.json"))  # no mark an hour old: every name, the late file among them
    assert verdict(spec, lake) == (False, f"a new file: {landing}/0-late.json")
    (landing / "0-late.json").unlink()
    assert idle.listing_start(idle.Checkpoint(str(checkpoint)), str(landing), spec.source) == (
        None, "no mark look_back old yet: every name")
    assert verdict(spec, lake)[0] is True
    marks.write_text(json.dumps({"root": "file:/elsewhere", "full_ms": now, "marks": [[now - 2 * hour, "a.json"]]}))
    assert idle.listing_start(idle.Checkpoint(str(checkpoint)), str(landing), spec.source) == (
        None, "the marks are for another folder (file:/elsewhere): every name")
