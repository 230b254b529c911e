"""Small builders for test inputs: landing files, specs, checkpoint fingerprints."""

from __future__ import annotations

import hashlib
import json
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


def write_orders(folder: Path, name: str, ids: range) -> Path:
    rows = [
        json.dumps({"id": i, "ts": f"2026-11-0{1 + i % 3}T10:00:00Z", "customer": f"c{i % 7}", "amount": i * 1.5})
        for i in ids
    ]
    return write_lines(folder / name, rows)


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
