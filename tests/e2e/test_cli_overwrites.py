"""`sluice run` with landing files rewritten after they were ingested: the warning on stderr, the ledger row,
and `on_overwrite: reingest` killed (JVM halted, as kill -9) at its two commits, then run again: each version
of the file is in the table exactly once. The runs that set up and the ones after a kill are made in-process
(``run_here``); the warning's run and the killed ones are `sluice run` processes."""

from __future__ import annotations

import json
import os
from collections import Counter

from bench.chaos import HALT_ENV, chaos_jar, chaos_spark_conf
from tests.e2e.conftest import last_json_line, sluice
from tests.helpers import ran_here, run_here, write_lines, write_spec


def rewrite(path, version: int, ids: range) -> None:
    write_lines(path, [json.dumps({"id": i, "v": version}) for i in ids])
    stat = path.stat()  # a rewrite some seconds after the previous export
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + version * 5_000_000_000))


def halted_run(monkeypatch, pattern: str) -> None:
    monkeypatch.setenv(HALT_ENV, pattern)
    done = sluice("run", "items")
    monkeypatch.delenv(HALT_ENV)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "sluice chaos: halting the JVM before writing" in done.stderr, done.stderr[-3000:]
    assert "spark-submit exited with code 137" in done.stderr


def here(spark, lake) -> dict:
    return ran_here(spark, lake, "items", run_id="after-a-kill")


def test_a_rewrite_is_warned_about_and_reingested_exactly_once_across_kills(lake, spark, monkeypatch):
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", str(chaos_jar()))
    spec = {"name": "items", "source": {"format": "json", "path": "landing/items", "schema": "id BIGINT, v INT"},
            "sink": {"path": "bronze/items"}, "spark_conf": chaos_spark_conf()}
    write_spec(lake.pipelines_dir, spec)
    landed = lake.lake_root / "landing" / "items" / "f.json"
    rewrite(landed, 1, range(0, 5))
    first = run_here(spark, lake, lake.pipelines_dir / "items.yaml")  # the set-up run, in-process
    assert first["status"] == "succeeded", first["error"]

    # on_overwrite: warn (the default): one warning line with the file and the options; the ledger has it
    rewrite(landed, 2, range(0, 6))
    warned = sluice("run", "items")
    assert warned.returncode == 0, warned.stderr[-3000:]
    assert (f"warning: items: 1 landing file(s) rewritten after they were ingested, their new content NOT ingested: "
            f"{landed}. Options: source.on_overwrite: reingest") in warned.stderr
    assert last_json_line(warned.stdout)["overwritten_files"]["count"] == 1
    from deltalake import DeltaTable

    ledger = DeltaTable(str(lake.lake_root / "_sluice" / "ledger")).to_pyarrow_table().to_pylist()
    latest = max(ledger, key=lambda r: r["started_at"])
    assert (latest["overwritten_files"], latest["overwritten_paths"]) == (1, [str(landed)])

    # reingest, killed right before its Delta commit, then run again
    spec["source"]["on_overwrite"] = "reingest"
    write_spec(lake.pipelines_dir, spec)
    halted_run(monkeypatch, r"bronze/items/_delta_log/\d+\.json$")
    again = here(spark, lake)  # the runs after a kill: in-process, on what the killed driver left
    assert again["reingest"]["input_rows"] == 6

    # a third version, killed between its Delta commit and the companion checkpoint's commit: the rerun skips it
    rewrite(landed, 3, range(0, 7))
    halted_run(monkeypatch, r"reingest/checkpoint/commits/\d+$")
    replay = here(spark, lake)
    assert replay["reingest"]["skipped_batches"] == [1]
    here(spark, lake)

    table = spark.read.format("delta").load(str(lake.lake_root / "bronze" / "items")).collect()
    assert Counter((r.v, r.id) for r in table) == Counter([(1, i) for i in range(5)] + [(2, i) for i in range(6)]
                                                          + [(3, i) for i in range(7)])
