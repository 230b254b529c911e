"""A pipeline's backlog without Spark (sluice.operations.backlog): files the checkpoint has not taken, upstream Delta
versions it has not consumed, and `sluice backlog`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sluice.operations.backlog import delta_backlog, describe, files_backlog, measure
from sluice.spec import load_spec
from sluice.storage.checkpoint import Checkpoint
from tests.sluice.test_delta_log import _table


def _checkpoint(root: Path, *, offsets: dict[int, dict] | None = None, done: int | None = None,
                files: list[tuple[int, str]] = ()) -> Checkpoint:
    """A checkpoint as Spark leaves it: offsets/N (its metadata lines, then the source's end offset),
    commits/N, and the file source log sources/0/N."""
    for batch, offset in (offsets or {}).items():
        (root / "offsets").mkdir(parents=True, exist_ok=True)
        (root / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(offset)}')
    if done is not None:
        (root / "commits").mkdir(parents=True, exist_ok=True)
        for batch in range(done + 1):
            (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    by_batch: dict[int, list[str]] = {}
    for batch, path in files:
        by_batch.setdefault(batch, []).append(json.dumps({"path": f"file://{path}", "timestamp": 1, "batchId": batch}))
    for batch, lines in by_batch.items():
        (root / "sources" / "0").mkdir(parents=True, exist_ok=True)
        (root / "sources" / "0" / str(batch)).write_text("v1\n" + "\n".join(lines))
    return Checkpoint(str(root))


def _land(folder: Path, name: str, text: str = '{"id": 1}\n', mtime: int | None = None) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_files_backlog_is_the_listing_minus_the_source_log(tmp_path):
    landing = tmp_path / "landing"
    seen = [_land(landing, "a.json"), _land(landing, "dt=2026-11-01/b.json")]
    _land(landing, "c.json", '{"id": 3}\n' * 10, mtime=1_790_000_000)
    _land(landing, "dt=2026-11-02/d.json", '{"id": 4}\n', mtime=1_790_000_500)
    # what Spark's file source never reads: hidden files and folders, a writer's temporary file
    _land(landing, ".e.json.tmp")
    _land(landing, "_SUCCESS")
    _land(landing, "_temporary/f.json")
    checkpoint = _checkpoint(tmp_path / "cp", files=[(0, seen[0]), (1, seen[1])])
    assert files_backlog(str(landing), checkpoint) == {
        "files": 2, "bytes": 100 + 10, "oldest_at": "2026-09-21T14:13:20+00:00"}
    # a glob path and pathGlobFilter narrow it as they narrow Spark's listing
    assert files_backlog(f"{landing}/dt=*", checkpoint)["files"] == 1
    assert files_backlog(str(landing), checkpoint, options={"pathGlobFilter": "c.*"})["files"] == 1
    # a pipeline that never ran: everything waits; a folder not there yet: nothing does
    assert files_backlog(str(landing), Checkpoint(str(tmp_path / "none")))["files"] == 4
    assert files_backlog(str(tmp_path / "nothing"), checkpoint) == {"files": 0, "bytes": 0, "oldest_at": None}


def test_delta_backlog_counts_the_upstream_versions_not_consumed(tmp_path):
    table = _table(tmp_path)  # versions 0 and 1
    assert delta_backlog(str(table), Checkpoint(str(tmp_path / "new"))) == {"versions": 2, "upstream_version": 1}
    # consumed through version 0 (Delta's offset: version 1 not begun)
    begun = _checkpoint(tmp_path / "a", offsets={0: {"reservoirVersion": 1, "index": -1}}, done=0)
    assert delta_backlog(str(table), begun) == {"versions": 1, "upstream_version": 1}
    caught_up = _checkpoint(tmp_path / "b", offsets={0: {"reservoirVersion": 1, "index": 3}}, done=0)
    assert delta_backlog(str(table), caught_up) == {"versions": 0, "upstream_version": 1}


def test_sluice_backlog_prints_each_pipeline(tmp_path, lake, capsys):
    from sluice_cli.main import main
    from tests.helpers import write_spec

    write_spec(lake.pipelines_dir, {"name": "orders", "source": {"format": "json", "path": "landing/orders",
                                                                 "schema": "id BIGINT"}})
    write_spec(lake.pipelines_dir, {"name": "clean", "source": {"format": "delta", "pipeline": "orders"}})
    _land(lake.lake_root / "landing" / "orders", "a.json", '{"id": 1}\n' * 3)
    assert main(["backlog", "--json"]) == 0
    found = {b["pipeline"]: b for b in map(json.loads, capsys.readouterr().out.splitlines())}
    assert {k: v for k, v in found["orders"].items() if k not in ("oldest_at", "measured_in_s")} == {
        "pipeline": "orders", "source": "files", "files": 1, "bytes": 30}
    assert found["clean"]["source"] == "delta"
    assert found["clean"]["error"].startswith(f"the upstream table {lake.lake_root / 'orders'} does not exist yet")
    assert main(["backlog", "orders"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["pipeline", "source", "backlog"]
    assert lines[1].startswith("orders    files   1 files (30 B) since ")
    spec = load_spec(lake.pipelines_dir / "orders.yaml")
    assert describe(measure(spec, lake)).startswith("1 files (30 B) since ")
