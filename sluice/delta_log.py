"""Reading a Delta table's log on local disk without Spark: its latest version, properties, file count and
schema, from the latest commit's checksum file. The Spark side uses it to skip a Spark job (seconds on a
cold JVM); ``sluice validate`` to show the schema change a spec would make, without a JVM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def local_path(path: str) -> Path | None:
    """``path`` as a local file system path (a plain path or a ``file:`` URI); None for a remote one."""
    if "://" in path and not path.startswith("file:"):
        return None
    return Path(path.removeprefix("file://").removeprefix("file:"))


def local_log(path: str) -> Path | None:
    """The ``_delta_log`` folder of a table on local disk (None for a remote path or no table)."""
    local = local_path(path)
    log = local / "_delta_log" if local is not None else None
    return log if log is not None and log.is_dir() else None


def log_state(path: str) -> dict[str, Any] | None:
    """Version, table properties, file count and schema (Spark's JSON form) of a table on local disk, read
    from its ``_delta_log`` (the latest commit's version checksum file) without a Spark job -- on a fresh
    JVM each Delta query costs seconds. None when that is not possible (no table, a remote path, no
    checksum): ask Delta instead."""
    log = local_log(path)
    if log is None:
        return None
    try:
        versions = [int(p.name[:-5]) for p in log.iterdir() if p.name.endswith(".json") and p.name[:-5].isdigit()]
    except OSError:
        return None
    if not versions:
        return None
    version = max(versions)
    try:
        checksum = json.loads((log / f"{version:020d}.crc").read_text(encoding="utf-8"))
        schema = json.loads(checksum["metadata"]["schemaString"])
        return {
            "version": version,
            "properties": dict(checksum["metadata"].get("configuration") or {}),
            "num_files": int(checksum["numFiles"]),
            "columns": [f["name"] for f in schema["fields"]],
            "schema": schema,
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None
