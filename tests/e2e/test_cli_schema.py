"""docs/schema-inference.md's walkthrough through the real CLI (its runs handed to the host's shared driver): a
csv source without a schema, a dry run that shows the schema and stores nothing, the run that stores it,
``sluice schema NAME``."""

from __future__ import annotations

from datetime import date

from tests.e2e.conftest import last_json_line, sluice
from tests.helpers import write_lines, write_spec


def test_a_first_run_infers_and_stores_the_schema_and_sluice_schema_shows_it(lake, spark, shared_driver):
    write_spec(lake.pipelines_dir, {"name": "zips", "source": {
        "format": "csv", "path": "landing/zips", "options": {"header": True}, "schema_hints": "signed_up DATE"},
        "sink": {"path": "bronze/zips"}})
    landed = write_lines(lake.lake_root / "landing" / "zips" / "1.csv",
                         ["zip,city,signed_up", "02134,Boston,2026-11-01", "00501,Holtsville,2026-11-02"])
    ddl = "zip STRING, city STRING, signed_up DATE"

    dry = sluice("run", "zips", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert f"schema: inferred from 1 file(s), not stored (a dry run stores nothing): {ddl}\n" in dry.stderr
    assert last_json_line(dry.stdout)["schema_inferred"] == {
        "version": 0, "ddl": ddl, "files": [str(landed)], "hints": "signed_up DATE", "stored": False}
    assert not (lake.checkpoint_root / "zips").exists()

    first = sluice("run", "zips")
    assert first.returncode == 0, first.stderr[-3000:]
    summary = last_json_line(first.stdout)
    assert (summary["output_rows"], summary["schema_version"], summary["schema_inferred"]["stored"]) == (2, 0, True)
    assert f"schema: inferred from 1 file(s), stored as version 0: {ddl}\n" in first.stderr
    assert sorted(tuple(r) for r in spark.read.format("delta").load(summary["sink"]).collect()) == [
        ("00501", "Holtsville", date(2026, 11, 2)),
        ("02134", "Boston", date(2026, 11, 1))]

    shown = sluice("schema", "zips")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"zips: 1 version(s) stored in {lake.checkpoint_root / 'zips'}/schemas, version 0 in use"
    assert lines[1].startswith("version 0  ") and lines[1].endswith(
        f"  run {summary['run_id']}  inferred from 1 file(s) with hints signed_up DATE")
    assert lines[2:] == [f"  {ddl}", f"  sampled: {landed}"]
