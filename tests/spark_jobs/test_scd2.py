"""The SCD type 2 sink (``sink.mode: scd2``) on real Spark and Delta: hand-computed history tables.

The history tests call the sink's batch write (:func:`spark_jobs.sinks.scd2.scd2_rows`) in-process, one call per
micro-batch; the last tests go through the pipeline's run path (checkpoint, quarantine, replay after a kill).
Rows are ``(id, seq, name, city, op, __start_at, __end_at)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.contract import run_job
from sluice.spec import Sink
from sluice.spec.errors import SpecError
from spark_jobs.run.runner import run_pipeline
from spark_jobs.sinks.commit import Commit
from spark_jobs.sinks.scd2 import Scd2ColumnError, history_schema, scd2_rows
from tests.helpers import delta_version, make_spec, write_lines

SCHEMA = "id BIGINT, seq BIGINT, name STRING, city STRING, op STRING"
APP_ID = "sluice-people-test"


def sink(**fields) -> Sink:
    return Sink(mode="scd2", keys=["id"], sequence_by="seq", delete_when="op = 'D'", **fields)


@pytest.fixture
def history(spark, tmp_path):
    """An empty history table; ``history.apply(changes, batch_id, sink)`` writes one micro-batch of changes,
    ``history.rows()`` reads the table sorted."""
    from pyspark.sql.types import StructType

    path = str(tmp_path / "people")
    spark.createDataFrame([], history_schema(sink(), StructType.fromDDL(SCHEMA))).write.format("delta").save(path)

    class History:
        def apply(self, changes, batch_id, with_sink=None):
            batch = spark.createDataFrame(changes, SCHEMA)
            scd2_rows(batch, with_sink or sink(), path, Commit(batch_id, app_id=APP_ID))

        def rows(self):
            return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())

        def version(self):
            return delta_version(path)

    return History()


# --- history -------------------------------------------------------------------------------------

def test_inserts_updates_and_deletes_make_one_row_per_version(history):
    history.apply([(1, 1, "ann", "oslo", "I"), (2, 1, "bob", "rome", "I"), (1, 2, "ann", "bergen", "U"),
                   (3, 1, "cy", "nice", "I")], 0)
    assert history.rows() == [
        (1, 1, "ann", "oslo", "I", 1, 2),
        (1, 2, "ann", "bergen", "U", 2, None),
        (2, 1, "bob", "rome", "I", 1, None),
        (3, 1, "cy", "nice", "I", 1, None),
    ]
    # bob deleted; cy moves; a deletion of a key the table never had changes nothing; ann's change repeats
    # her values (only seq differs): no new version, the current one takes the change's seq in place
    history.apply([(2, 3, None, None, "D"), (3, 2, "cy", "lyon", "U"), (4, 5, None, None, "D"),
                   (1, 3, "ann", "bergen", "U")], 1)
    assert history.rows() == [
        (1, 1, "ann", "oslo", "I", 1, 2),
        (1, 3, "ann", "bergen", "U", 2, None),
        (2, 1, "bob", "rome", "I", 1, 3),
        (3, 1, "cy", "nice", "I", 1, 2),
        (3, 2, "cy", "lyon", "U", 2, None),
    ]
    # bob comes back: a new current version after the gap [3, 7) his deletion left
    history.apply([(2, 7, "bob", "rome", "I")], 2)
    assert history.rows()[2:4] == [(2, 1, "bob", "rome", "I", 1, 3), (2, 7, "bob", "rome", "I", 7, None)]


def test_late_changes_are_put_in_their_place_in_history(history):
    history.apply([(1, 10, "ann", "oslo", "I"), (1, 50, "ann", "rome", "U")], 0)
    # a change older than the current version splits the version it falls in
    history.apply([(1, 30, "ann", "nice", "U")], 1)
    assert history.rows() == [
        (1, 10, "ann", "oslo", "I", 10, 30),
        (1, 30, "ann", "nice", "U", 30, 50),
        (1, 50, "ann", "rome", "U", 50, None),
    ]
    # a late deletion ends the version it falls in (the current one stays); a late change after it starts
    # a version that ends where the next one starts
    history.apply([(1, 40, None, None, "D")], 2)
    history.apply([(1, 45, "ann", "pisa", "U")], 3)
    assert history.rows() == [
        (1, 10, "ann", "oslo", "I", 10, 30),
        (1, 30, "ann", "nice", "U", 30, 40),
        (1, 45, "ann", "pisa", "U", 45, 50),
        (1, 50, "ann", "rome", "U", 50, None),
    ]
    # late changes that repeat the version they fall in: no new version, the version takes their values
    history.apply([(1, 20, "ann", "oslo", "I"), (1, 60, "ann", "rome", "U")], 4)
    assert history.rows() == [
        (1, 20, "ann", "oslo", "I", 10, 30),
        (1, 30, "ann", "nice", "U", 30, 40),
        (1, 45, "ann", "pisa", "U", 45, 50),
        (1, 60, "ann", "rome", "U", 50, None),
    ]


def test_out_of_order_changes_within_one_batch_are_ordered_by_sequence(history):
    history.apply([(1, 3, "ann", "rome", "U"), (1, 1, "ann", "oslo", "I"), (1, 4, None, None, "D"),
                   (1, 2, "ann", "nice", "U"), (1, 5, None, None, "D")], 0)
    assert history.rows() == [
        (1, 1, "ann", "oslo", "I", 1, 2),
        (1, 2, "ann", "nice", "U", 2, 3),
        (1, 3, "ann", "rome", "U", 3, 4),  # the deletion at 4 ends it; the one at 5 finds nothing to end
    ]


def test_duplicate_changes_make_one_version_the_last_to_arrive(history):
    # same key and seq in one batch: the batch's last row; the exact duplicate: one version
    history.apply([(1, 10, "ann", "oslo", "I"), (1, 10, "ann", "OSLO", "I"), (1, 20, "ann", "rome", "U"),
                   (1, 20, "ann", "rome", "U")], 0)
    assert history.rows() == [(1, 10, "ann", "OSLO", "I", 10, 20), (1, 20, "ann", "rome", "U", 20, None)]
    # again in a later batch: the later batch's change replaces the table's version of that seq
    history.apply([(1, 10, "ann", "bergen", "I"), (1, 20, "ann", "rome", "U")], 1)
    assert history.rows() == [(1, 10, "ann", "bergen", "I", 10, 20), (1, 20, "ann", "rome", "U", 20, None)]


def test_track_history_columns_version_only_their_changes(history):
    by_city = sink(track_history_columns=["city"])
    history.apply([(1, 1, "ann", "oslo", "I"), (1, 2, "Ann", "oslo", "U"), (1, 3, "Ann", "rome", "U"),
                   (2, 1, "bob", "nice", "I")], 0, by_city)
    # the name change updated its version in place (seq and name of its last change)
    assert history.rows() == [
        (1, 2, "Ann", "oslo", "U", 1, 3),
        (1, 3, "Ann", "rome", "U", 3, None),
        (2, 1, "bob", "nice", "I", 1, None),
    ]
    # a late change of the city splits the version [1, 3): its part before 2 gets the change's start and, as
    # the version only kept its last untracked values, those values
    history.apply([(1, 2, "ann", "lyon", "U"), (2, 4, "Bob", "nice", "U")], 1, by_city)
    assert history.rows() == [
        (1, 1, "Ann", "oslo", "U", 1, 2),
        (1, 2, "ann", "lyon", "U", 2, 3),
        (1, 3, "Ann", "rome", "U", 3, None),
        (2, 4, "Bob", "nice", "U", 1, None),
    ]
    # the change at 2 again, now to rome: the version [3, None) of rome no longer starts a version, so the MERGE
    # deletes its row and the version from 2 takes its values
    history.apply([(1, 2, "ann", "rome", "U")], 2, by_city)
    assert history.rows() == [
        (1, 1, "Ann", "oslo", "U", 1, 2),
        (1, 3, "Ann", "rome", "U", 2, None),
        (2, 4, "Bob", "nice", "U", 1, None),
    ]


def test_except_columns_do_not_start_versions(history):
    history.apply([(1, 1, "ann", "oslo", "I"), (1, 2, "Ann", "oslo", "U"), (1, 3, "Ann", "oslo", "X"),
                   (1, 4, "Ann", "rome", "U")], 0, sink(except_columns=["name", "op"]))
    assert history.rows() == [(1, 3, "Ann", "oslo", "X", 1, 4), (1, 4, "Ann", "rome", "U", 4, None)]


def test_a_replayed_batch_changes_nothing(history):
    history.apply([(1, 1, "ann", "oslo", "I")], 0)
    history.apply([(1, 2, "ann", "rome", "U")], 1)
    version, rows = history.version(), history.rows()
    # batch 1 again (a restart after a crash), even with other rows: Delta skips the transaction it has
    history.apply([(1, 2, "ann", "pisa", "U"), (1, 3, None, None, "D")], 1)
    assert (history.version(), history.rows()) == (version, rows)
    assert rows == [(1, 1, "ann", "oslo", "I", 1, 2), (1, 2, "ann", "rome", "U", 2, None)]


# --- columns and spec ----------------------------------------------------------------------------

def test_the_table_has_start_and_end_of_the_sequence_type(spark):  # a DDL string is parsed by the JVM
    from pyspark.sql.types import StructType

    schema = history_schema(sink(), StructType.fromDDL("id BIGINT, seq TIMESTAMP, name STRING, op STRING"))
    assert schema.simpleString() == ("struct<id:bigint,seq:timestamp,name:string,op:string,"
                                     "__start_at:timestamp,__end_at:timestamp>")
    with pytest.raises(Scd2ColumnError, match=r"^sink.track_history_columns: town is not a column of the rows the "
                                              r"sink gets \(columns: id, seq, name, op\)"):
        history_schema(sink(track_history_columns=["town"]), StructType.fromDDL("id BIGINT, seq BIGINT, name STRING, op STRING"))


def people_spec(**sink_fields) -> dict:
    return {
        "name": "people",
        "source": {"format": "json", "path": "landing/people", "schema": SCHEMA},
        "sink": {"mode": "scd2", "keys": ["id"], "sequence_by": "seq", **sink_fields},
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"keys": []}, "sink.keys: required with mode: scd2; name the key columns"),
        ({"sequence_by": None}, "sink.sequence_by: required with mode: scd2; name the column that orders"),
        ({"sequence_by": "id"}, "sink.sequence_by: 'id' is a key column"),
        ({"order_by": "seq"}, "sink.order_by: a merge sink's field; with mode: scd2 name the column that orders a "
                              "key's changes in sequence_by (e.g. sequence_by: seq)"),
        ({"track_history_columns": ["city"], "except_columns": ["name"]},
         "sink.track_history_columns: set either track_history_columns"),
        ({"except_columns": ["id"]}, "sink.except_columns: id is a key column"),
        ({"mode": "merge"}, "sink.sequence_by: only used with mode: scd2 (the sink's mode is merge)"),
    ],
)
def test_invalid_scd2_specs_name_the_field(change, message):
    with pytest.raises(SpecError) as caught:
        make_spec(people_spec(**change))
    assert f"test-spec: {message}" in str(caught.value)


def test_an_scd2_sink_refuses_backfill():
    with pytest.raises(SpecError, match=r"backfill: an scd2 sink keeps every key's history .* --reset-checkpoint"):
        make_spec({**people_spec(), "backfill": {"column": "seq", "path": "landing/people/dt={{ ds }}"}})


# --- through the pipeline ------------------------------------------------------------------------

def land(lake, name: str, changes) -> None:
    write_lines(lake.lake_root / "landing" / "people" / name,
                [json.dumps(dict(zip(("id", "seq", "name", "city", "op"), c))) for c in changes])


def run(spark, spec, lake, **options) -> dict:
    return run_pipeline(spark, spec, lake, run_job(trigger=spec.trigger, run_id="t", **options)).to_json()


def table_rows(spark, spec, lake) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(spec.sink_path(lake)).drop("_rescued").collect())


def test_a_pipeline_run_writes_history_quarantines_unsequenced_rows_and_survives_a_kill(spark, lake):
    spec = make_spec(people_spec(delete_when="op = 'D'"))
    land(lake, "1.json", [(1, 1, "ann", "oslo", "I"), (2, 1, "bob", "rome", "I"), (3, None, "cy", "nice", "I")])
    first = run(spark, spec, lake)
    assert first["error"] is None
    assert table_rows(spark, spec, lake) == [(1, 1, "ann", "oslo", "I", 1, None), (2, 1, "bob", "rome", "I", 1, None)]
    assert (first["bad_records"], first["quarantined_rows"]) == (1, 1)
    quarantined = spark.read.format("delta").load(spec.quarantine_table_path(lake)).collect()
    assert [(json.loads(r.raw)["name"], r.error) for r in quarantined] == [
        ("cy", "no value in seq (sink.sequence_by): the change cannot be placed in its key's history")]
    assert first["micro_batches"][0]["merge"] == {"inserted": 2, "updated": 0, "deleted": 0}

    land(lake, "2.json", [(1, 5, "ann", "rome", "U"), (1, 3, "ann", "nice", "U"), (2, 2, None, None, "D")])
    second = run(spark, spec, lake)
    expected = [
        (1, 1, "ann", "oslo", "I", 1, 3),
        (1, 3, "ann", "nice", "U", 3, 5),
        (1, 5, "ann", "rome", "U", 5, None),
        (2, 1, "bob", "rome", "I", 1, 2),
    ]
    assert table_rows(spark, spec, lake) == expected
    # ann's [1, None) updated, two versions inserted; bob's version updated
    assert second["micro_batches"][0]["merge"] == {"inserted": 2, "updated": 2, "deleted": 0}
    version = second["delta_version_after"]

    # the driver died after batch 1's MERGE committed, before the checkpoint's commits/1: the next run
    # replays the batch, which Delta skips as a transaction it has
    checkpoint = Path(spec.checkpoint_path(lake))
    (checkpoint / "commits" / "1").unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)
    replay = run(spark, spec, lake)
    assert replay["skipped_batches"] == [1]
    assert delta_version(spec.sink_path(lake)) == version
    assert table_rows(spark, spec, lake) == expected
    assert (checkpoint / "commits" / "1").is_file()

    # a dry run writes the next batch into a clone: the summary says what it would do, the table is as it was
    land(lake, "3.json", [(2, 9, "bob", "pisa", "I"), (1, 4, "ann", "lyon", "U")])
    dry = run(spark, spec, lake, dry_run=True)
    # bob's new version and ann's [4, 5) inserted; ann's [3, 5) ends at 4 now
    assert dry["micro_batches"][0]["merge"] == {"inserted": 2, "updated": 1, "deleted": 0}
    assert table_rows(spark, spec, lake) == expected
