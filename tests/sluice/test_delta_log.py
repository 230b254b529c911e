"""The Delta log read without Spark, through the Storage layer: versions, state, history, actions."""

from __future__ import annotations

import json

from sluice.storage.delta_log import DeltaLog, log_state

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                       {"name": "day", "type": "date", "nullable": True, "metadata": {}}]}


def _commit(log, version: int, *actions: dict) -> None:
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _table(tmp_path):
    log = tmp_path / "orders" / "_delta_log"
    log.mkdir(parents=True)
    _commit(log, 0, {"commitInfo": {"operation": "CREATE TABLE", "operationParameters": {"partitionBy": []}}},
            {"metaData": {"schemaString": json.dumps(SCHEMA)}})
    _commit(log, 1, {"commitInfo": {"operation": "WRITE", "operationParameters": {"mode": "Overwrite", "epochId": 3},
                                    "operationMetrics": {"numOutputRows": "2"},
                                    "userMetadata": '{"sluice_app_id": "a"}'}},
            {"add": {"path": "part-1.parquet", "dataChange": True}},
            {"remove": {"path": "part-0.parquet", "dataChange": True}})
    (log / f"{1:020d}.crc").write_text(json.dumps({
        "numFiles": 1, "metadata": {"schemaString": json.dumps(SCHEMA), "configuration": {"sluice.pipeline": "orders"}}}))
    (log / f".{2:020d}.json.3f1c.tmp").write_text("{}")  # a writer's temporary file: no commit
    (log / "_commits").mkdir()
    return tmp_path / "orders"


def test_the_log_gives_versions_state_history_and_actions(tmp_path):
    table = _table(tmp_path)
    log = DeltaLog.open(str(table))
    assert log is not None and log.versions() == [0, 1]
    assert log_state(f"file://{table}") == {
        "version": 1, "properties": {"sluice.pipeline": "orders"}, "num_files": 1, "columns": ["id", "day"],
        "schema": SCHEMA}
    assert log.history(after=0) == [{
        "version": 1, "operation": "WRITE",
        # as DESCRIBE HISTORY shows them: parameter values as text
        "operationParameters": {"mode": "Overwrite", "epochId": "3"},
        "operationMetrics": {"numOutputRows": "2"}, "userMetadata": '{"sluice_app_id": "a"}'}]
    assert [row["version"] for row in log.history()] == [0, 1]
    assert [next(iter(a)) for a in log.actions(1)] == ["commitInfo", "add", "remove"]


def test_no_checksum_no_state_and_no_commit_no_table(tmp_path):
    table = _table(tmp_path)
    (table / "_delta_log" / f"{1:020d}.crc").unlink()
    assert log_state(str(table)) is None  # ask Delta instead
    for commit in (table / "_delta_log").glob("*.json"):
        commit.unlink()
    log = DeltaLog.open(str(table))
    assert log is not None and log.versions() == [] and log.history() == []
    log.delete()  # a creation that died before its first commit: no table
    assert DeltaLog.open(str(table)) is None and not (table / "_delta_log").exists()


def test_a_folder_without_a_log_is_no_table(tmp_path):
    assert DeltaLog.open(str(tmp_path / "nothing")) is None
    assert log_state(str(tmp_path / "nothing")) is None
