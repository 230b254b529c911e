"""source.listing: incremental -- a run lists only the names after a high-water mark (jvm/files ``Listing``): the
tail of the folder, late files inside the look-back read, those outside it read by the next full listing, and
each file once; on real Spark and Delta, in-process."""

from __future__ import annotations

import json
from pathlib import Path

from sluice.contract import run_job
from sluice.operations.idle import listing_start
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.run.runner import run_pipeline
from tests.helpers import make_spec
from tests.spark_jobs.test_discovery import SCHEMA, ids, land, run


def spec_of(**source):
    return make_spec({"name": "found", "source": {"format": "json", "path": "landing/found", "schema": SCHEMA,
                                                   "listing": "incremental", **source},
                      "sink": {"path": "bronze/found"}})


def marks_file(spec, lake) -> Path:
    return Path(spec.checkpoint_path(lake)) / "sources" / "0" / "index" / "marks"


def age_marks(spec, lake, hours: float, *, full_too: bool = False) -> dict:
    """As if the listings recorded so far had started ``hours`` earlier (and the last full one, with ``full_too``)."""
    path = marks_file(spec, lake)
    marks = json.loads(path.read_text())
    shift = int(hours * 3600 * 1000)
    marks["marks"] = [[t - shift, name] for t, name in marks["marks"]]
    if full_too:
        marks["full_ms"] -= shift
    path.write_text(json.dumps(marks))
    return marks


def test_a_run_lists_the_names_after_its_mark_and_a_full_listing_reads_the_late_ones(spark, lake):
    spec = spec_of(look_back="0s")
    for day, name in ((1, "a"), (2, "b"), (3, "c")):
        land(lake, f"date=2026-12-0{day}/{name}.json", [day])
    first = run(spark, spec, lake)["discovery"]
    assert (first["listing"], first["listing_why"], first["marks_written"]) == (
        "full", "the first listing: no mark yet", True)
    assert first["list_requests"] == 4  # the folder and its 3 day folders
    marks = json.loads(marks_file(spec, lake).read_text())
    assert marks["root"] == f"file:{lake.lake_root}/landing/found"
    assert [name for _, name in marks["marks"]] == ["date=2026-12-03/c.json"]
    assert marks["full_ms"] == marks["marks"][0][0]

    land(lake, "date=2026-12-04/d.json", [4])
    land(lake, "date=2026-12-03/e.json", [5])  # in the mark's own folder, after it: read
    second = run(spark, spec, lake)
    assert (second["input_rows"], second["discovery"]["listing"], second["discovery"]["start_after"]) == (
        2, "incremental", "date=2026-12-03/c.json")
    # the folder, the mark's day folder and the new one: days 1 and 2 are not read
    assert second["discovery"]["list_requests"] == 3
    assert [name for _, name in json.loads(marks_file(spec, lake).read_text())["marks"]] == [
        "date=2026-12-03/c.json", "date=2026-12-04/d.json"]

    land(lake, "date=2026-12-02/late.json", [6])  # lands after day 4 was read, in an older folder: outside
    land(lake, "date=2026-12-01/a.json", [1, 100])  # a rewrite of an old file: not looked at either
    third = run(spark, spec, lake)
    assert (third["input_rows"], third["discovery"]["start_after"], third["discovery"]["marks_written"]) == (
        0, "date=2026-12-04/d.json", False)  # nothing new: the marks stay, nothing is written
    assert third["overwritten_files"]["count"] == 0
    assert ids(spark, spec, lake) == [1, 2, 3, 4, 5]

    due = spec_of(look_back="0s", full_listing_every="1h")
    age_marks(spec, lake, 2, full_too=True)  # the last full listing two hours ago
    fourth = run(spark, due, lake)
    assert (fourth["discovery"]["listing"], fourth["discovery"]["listing_why"]) == (
        "full", "a full listing is due (full_listing_every)")
    assert fourth["input_rows"] == 1  # the late file, once
    assert fourth["overwritten_files"]["count"] == 1  # the full listing sees the rewrite
    assert ids(spark, spec, lake) == [1, 2, 3, 4, 5, 6]
    assert run(spark, due, lake)["discovery"]["listing"] == "incremental"  # the full listing is recorded


def test_a_late_file_inside_the_look_back_is_read_and_one_outside_it_waits_for_the_full_listing(spark, lake):
    spec = spec_of(look_back="30m")
    land(lake, "2026-12-06T10.json", [10])
    land(lake, "2026-12-06T12.json", [12])
    run(spark, spec, lake)
    again = run(spark, spec, lake)["discovery"]  # no listing 30 minutes old yet: every name
    assert (again["listing"], again["listing_why"]) == ("full", "no mark is look_back old yet")
    age_marks(spec, lake, 1)  # the first listing an hour ago
    land(lake, "2026-12-06T14.json", [14])
    land(lake, "2026-12-06T13.json", [13])  # late, above the hour-old mark: inside the look-back
    # the launcher's idle check (Python) reads the marks as the driver's listing (Java) does
    assert listing_start(Checkpoint(spec.checkpoint_path(lake)), spec.source_path(lake), spec.source) == (
        "2026-12-06T12.json", "after the mark of a listing look_back old or more")
    second = run(spark, spec, lake)
    assert (second["input_rows"], second["discovery"]["listing"], second["discovery"]["start_after"]) == (
        2, "incremental", "2026-12-06T12.json")
    land(lake, "2026-12-06T11.json", [11])  # late, below the hour-old mark: outside it
    third = run(spark, spec, lake)
    assert (third["input_rows"], third["discovery"]["start_after"]) == (0, "2026-12-06T12.json")
    assert third["backlog_after"]["files"] == 0  # the backlog is the listing's: names after the mark
    age_marks(spec, lake, 25, full_too=True)  # a day since the last full listing (full_listing_every: 1d)
    fourth = run(spark, spec, lake)
    assert (fourth["input_rows"], fourth["discovery"]["listing"]) == (1, "full")
    assert ids(spark, spec, lake) == [10, 11, 12, 13, 14]


def test_marks_not_written_after_a_batch_only_widen_the_next_listing(spark, lake):
    # a run killed after its batch's file list and before its marks: the next run lists from the older mark,
    # and the files of that batch, in the index, are not read twice
    spec = spec_of(look_back="0s")
    land(lake, "a.json", [1])
    run(spark, spec, lake)
    before = marks_file(spec, lake).read_text()
    land(lake, "b.json", [2])
    land(lake, "c.json", [3])
    assert run(spark, spec, lake)["input_rows"] == 2
    marks_file(spec, lake).write_text(before)  # as if the kill came before the marks were replaced
    land(lake, "d.json", [4])
    after = run(spark, spec, lake)
    assert (after["input_rows"], after["discovery"]["start_after"], after["discovery"]["new_files"]) == (
        1, "a.json", 1)
    assert ids(spark, spec, lake) == [1, 2, 3, 4]


def test_a_pipeline_that_listed_every_name_moves_to_the_incremental_listing_without_a_reread(spark, lake):
    # a checkpoint made with listing: full (the default), then the spec changed: the first run lists every name
    # and writes the marks; nothing read before is read again, and a dry run writes no mark in the real index
    full = spec_of(listing="full")
    for name in ("a", "b"):
        land(lake, f"2026-12-06T0{ord(name) - 96}-{name}.json", [ord(name)])
    run(spark, full, lake)
    assert not marks_file(full, lake).exists()
    land(lake, "2026-12-06T03-c.json", [ord("c")])
    spec = spec_of(look_back="0s")
    dry = run_pipeline(spark, spec, lake, run_job(trigger=spec.trigger, run_id="d", dry_run=True,
                                                  write_ledger=False)).to_json()
    assert (dry["input_rows"], marks_file(spec, lake).exists()) == (1, False)
    moved = run(spark, spec, lake)
    assert (moved["input_rows"], moved["discovery"]["listing"], moved["discovery"]["listing_why"]) == (
        1, "full", "the first listing: no mark yet")
    land(lake, "2026-12-06T04-d.json", [ord("d")])
    after = run(spark, spec, lake)
    assert (after["input_rows"], after["discovery"]["start_after"]) == (1, "2026-12-06T03-c.json")
    assert ids(spark, spec, lake) == [97, 98, 99, 100]


def test_hidden_files_filters_and_clean_source_keep_working_after_a_mark(spark, lake):
    # the listing after a mark skips what Spark's file source skips, keeps pathGlobFilter, and the archived
    # files (clean_source) were read once: their absence changes nothing
    spec = spec_of(look_back="0s", options={"pathGlobFilter": "*.json"},
                   clean_source={"mode": "archive", "archive_dir": "archive/found", "retention": "0s"})
    land(lake, "d1/a.json", [1])
    first = run(spark, spec, lake)
    assert first["input_rows"] == 1 and not (lake.lake_root / "landing" / "found" / "d1" / "a.json").exists()
    for name, n in (("d2/_tmp.json", 100), ("d2/.b.json", 101), ("d2/notes.txt", 102), ("_staging/c.json", 103),
                    ("d2/b.json", 2)):
        land(lake, name, [n])
    second = run(spark, spec, lake)
    assert (second["input_rows"], second["discovery"]["listing"], second["discovery"]["start_after"]) == (
        1, "incremental", "d1/a.json")
    assert ids(spark, spec, lake) == [1, 2]
    assert sorted(p.name for p in (lake.lake_root / "archive" / "found").rglob("*.json")) == ["a.json", "b.json"]
