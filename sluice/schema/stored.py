"""A source's schema when the spec declares none: inferred once, stored in the checkpoint, versioned.

The first run of a json, csv or parquet pipeline without ``source.schema`` (or of a Kafka pipeline with
``value: {format: json}`` and no ``value.schema``) infers the schema from a sample of the landing files (of
the topic's records) (:mod:`spark_jobs.sources.inference`) and stores it as ``<checkpoint>/schemas/0`` before its
query starts; every later run reads with the latest stored version and never infers again, so a new file
cannot silently change a column's type. ``schema_evolution: add_columns`` stores the next version
(``schemas/1``, ...) when a batch adds columns (:func:`next_version`). The files are
:class:`sluice.storage.checkpoint.Checkpoint`'s; this module is what they mean. Ground floor: no Spark, no Airflow.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict

from sluice.spec import FileSource, KafkaSource, PipelineSpec
from sluice.spec.ddl import parse_ddl_schema
from sluice.storage.checkpoint import Checkpoint

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SchemaVersion(BaseModel):
    """One stored version of a source's schema (``schemas/<version>`` in the checkpoint)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    version: int
    ddl: str
    """The source's columns as Spark DDL: what the run reads the files with."""
    created_at: str
    run_id: str | None = None
    reason: Literal["inferred", "add_columns", "hints"]
    """``inferred`` from a sample of files or Kafka records (version 0), ``add_columns`` by a batch of the run ``run_id``, or
    ``hints``: the spec's ``schema_hints`` changed, and the run ``run_id`` stored their types."""
    files: list[str] = []
    """``inferred`` from files: the files sampled, oldest first."""
    records: int | None = None
    """``inferred`` from Kafka: how many records (values) were sampled."""
    topics: list[str] = []
    """``inferred`` from Kafka: the topics (or the subscribe pattern) sampled."""
    hints: str | None = None
    """The spec's ``schema_hints`` this version applies (carried to the next versions)."""
    added_columns: list[str] = []
    """``add_columns``: the columns this version added."""
    batch_id: int | None = None
    """``add_columns``: the micro-batch that added them."""


def infers_schema(spec: PipelineSpec) -> bool:
    """The pipeline's source schema is inferred and stored, not declared in the spec."""
    return isinstance(spec.source, (FileSource, KafkaSource)) and spec.source.infers_schema()


def schema_hints(spec: PipelineSpec) -> str | None:
    """The spec's ``schema_hints``: ``source.schema_hints``, or ``source.value.schema_hints`` for Kafka."""
    source = spec.source
    return source.value.schema_hints if isinstance(source, KafkaSource) else source.schema_hints


def quote(name: str) -> str:
    return name if _PLAIN_NAME.match(name) else "`" + name.replace("`", "``") + "`"


def ddl_text(columns: list[tuple[str, str]]) -> str:
    """``[(name, type)]`` as DDL: ``id BIGINT, ts TIMESTAMP``."""
    return ", ".join(f"{quote(name)} {kind.strip()}" for name, kind in columns)


def with_hints(columns: list[tuple[str, str]], hints: str | None) -> list[tuple[str, str]]:
    """The inferred ``columns`` with the hinted types: a hinted column keeps its place and takes the hint's
    type, a hinted column the sample does not have is added at the end."""
    if not hints:
        return list(columns)
    hinted = {name.lower(): (name, kind) for name, kind in parse_ddl_schema(hints)}
    out = [(name, hinted.pop(name.lower())[1]) if name.lower() in hinted else (name, kind) for name, kind in columns]
    return out + list(hinted.values())


def with_schema(spec: PipelineSpec, ddl: str) -> PipelineSpec:
    """``spec`` reading its source with ``ddl``: the effective spec every part of the run reads."""
    source = spec.source
    if isinstance(source, KafkaSource):  # a json value's columns: source.value.schema
        source = source.model_copy(update={"value": source.value.model_copy(update={"schema_": ddl})})
    else:
        source = source.model_copy(update={"schema_": ddl})
    return spec.model_copy(update={"source": source})


def history(checkpoint: str) -> list[SchemaVersion]:
    """Every stored version, oldest first (an unreadable file is skipped)."""
    cp = Checkpoint(checkpoint)
    found = [cp.read_schema(n) for n in cp.schema_versions()]
    return [SchemaVersion.model_validate(record) for record in found if record is not None]


def stored_spec(spec: PipelineSpec, checkpoint: str) -> tuple[PipelineSpec, SchemaVersion | None]:
    """``spec`` with the schema its next run reads with, when it is known without Spark: declared, or the
    latest stored version. ``(spec, None)`` when the spec declares it (or has no schema to declare)."""
    if not infers_schema(spec):
        return spec, None
    found = Checkpoint(checkpoint).latest_schema()
    if found is None:
        return spec, None
    version = SchemaVersion.model_validate(found)
    return with_schema(spec, version.ddl), version


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def next_version(current: SchemaVersion, added: list[tuple[str, str]], *, run_id: str,
                 batch_id: int) -> SchemaVersion | None:
    """The version after ``current`` with the columns ``added`` (name, DDL type) that it does not have yet;
    None when it has them all."""
    known = {name.lower() for name, _ in parse_ddl_schema(current.ddl)}
    new = [(name, kind) for name, kind in added if name.lower() not in known]
    if not new:
        return None
    return SchemaVersion(version=current.version + 1, ddl=f"{current.ddl}, {ddl_text(new)}", created_at=now(),
                         run_id=run_id, reason="add_columns", hints=current.hints,
                         added_columns=[name for name, _ in new], batch_id=batch_id)


def hinted_version(current: SchemaVersion, hints: str | None, *, run_id: str) -> SchemaVersion | None:
    """The version after ``current`` when the spec's ``schema_hints`` changed since it was stored and name
    types it does not have: hints are applied once, when they change, never by a new inference. None when
    nothing changes (removing a hint keeps the types it gave)."""
    if not hints or hints == current.hints:
        return None
    columns = parse_ddl_schema(current.ddl)
    hinted = with_hints(columns, hints)
    if [(n, k.replace(" ", "").lower()) for n, k in hinted] == [(n, k.replace(" ", "").lower()) for n, k in columns]:
        return None
    have = {name.lower() for name, _ in columns}
    return SchemaVersion(version=current.version + 1, ddl=ddl_text(hinted), created_at=now(), run_id=run_id,
                         reason="hints", hints=hints,
                         added_columns=[n for n, _ in parse_ddl_schema(hints) if n.lower() not in have])


def store_missing(checkpoint: Checkpoint, versions: list[SchemaVersion]) -> list[int]:
    """Write the versions the checkpoint does not hold (a first run's version 0; all of them again in the new
    checkpoint of a reset, so the history and the schema in use survive it). Returns the versions written."""
    have = set(checkpoint.schema_versions())
    written = []
    for version in versions:
        if version.version not in have:
            checkpoint.write_schema(version.model_dump())
            written.append(version.version)
    return written


def describe(versions: list[SchemaVersion]) -> list[str]:
    """``sluice schema NAME``: one block per version, oldest first."""
    lines = []
    for v in versions:
        if v.reason == "inferred":
            sample = (f"{v.records} record(s) of {', '.join(v.topics)}" if v.records is not None
                      else f"{len(v.files)} file(s)")
            made = f"inferred from {sample}" + (f" with hints {v.hints}" if v.hints else "")
        elif v.reason == "hints":
            made = f"schema_hints changed: {v.hints}"
        else:
            made = f"add_columns {', '.join(v.added_columns)} (batch {v.batch_id})"
        lines.append(f"version {v.version}  {v.created_at}  run {v.run_id}  {made}")
        lines.append(f"  {v.ddl}")
        lines += [f"  sampled: {f}" for f in v.files] if v.reason == "inferred" else []
    return lines
