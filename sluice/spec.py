"""The pipeline spec: YAML in, one frozen, validated model out.

Every entry point (the DAG factory, ``sluice validate``/``run``, the Spark job) loads specs through
:func:`load_spec`, so a spec that passes here is the same spec everywhere. Nothing here imports
PySpark or Airflow: validation happens before any JVM starts, and DAG parsing stays fast.

An invalid spec raises :class:`SpecError`, whose message names the file, the field and what is
allowed, e.g. ``include/pipelines/orders.yaml: source.format: 'xml' is not allowed; use one of:
json, csv, parquet, text``.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from sluice.avro_schema import AvroSchemaError, read_avro_schema
from sluice.ddl import DdlError, parse_ddl_schema
from sluice.settings import Settings, load_settings
from sluice.spec_errors import SpecError, describe

NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
# Spark's interval strings as accepted by withWatermark / window: "10 minutes", "1 hour", "30 seconds"
_INTERVAL_RE = re.compile(
    r"^\s*\d+\s*(microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)\s*$", re.IGNORECASE
)
_STATEFUL_SQL_RE = re.compile(r"\bgroup\s+by\b|\bdistinct\b|\bwindow\s*\(|\bjoin\b", re.IGNORECASE)


def stateful_sql(sql: str | None) -> bool:
    """SQL that keeps state across micro-batches in a streaming query: an aggregation, DISTINCT, a window,
    a join. The one definition: :meth:`PipelineSpec.is_stateful` adds the watermark and dedupe."""
    return bool(sql and _STATEFUL_SQL_RE.search(sql))

SCHEDULE_PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")

Trigger = Literal["available_now", "once"]
FileFormat = Literal["json", "csv", "parquet", "text"]
SinkMode = Literal["append", "complete", "merge", "scd2"]
OnBadRecords = Literal["quarantine", "fail", "drop"]
OnViolation = Literal["warn", "drop", "quarantine", "fail"]
SchemaEvolution = Literal["rescue", "add_columns", "fail"]
OnOverwrite = Literal["warn", "fail", "reingest"]
RESCUED_COLUMN = "_rescued"
"""JSON sources: the fields of a record that the schema does not declare, as a JSON object (null if none)."""
SCD2_START = "__start_at"
"""``scd2`` sinks: the ``sequence_by`` value of the change that started a version of a key."""
SCD2_END = "__end_at"
"""``scd2`` sinks: the ``sequence_by`` value of the change that ended a version (the next version's start, or
the deletion's); NULL for the key's current version."""
OptionValue = str | int | float | bool


def _ddl_columns(ddl: str) -> list[tuple[str, str]]:
    try:
        return parse_ddl_schema(ddl)
    except DdlError as err:
        raise ValueError(f"not a Spark DDL schema: {err}") from None


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, use_attribute_docstrings=True)


class Watermark(_Model):
    """Event-time watermark applied to the source before the transform's SQL."""

    column: str
    """The event-time column (a TIMESTAMP in the source schema)."""
    delay: str
    """How late data may arrive, as a Spark interval: ``10 minutes``, ``1 hour``."""

    @field_validator("delay")
    @classmethod
    def _interval(cls, value: str) -> str:
        if not _INTERVAL_RE.match(value):
            raise ValueError(f"{value!r} is not an interval; write it like '10 minutes' or '1 hour'")
        return value.strip()


class ReferenceTable(_Model):
    """A small static table the transform's SQL can join (a stream-static join), read once per run."""

    format: Literal["csv", "json", "parquet", "delta"]
    """The table's format: ``csv``, ``json``, ``parquet`` or ``delta``."""
    path: str
    """Relative to the project folder (``SLUICE_HOME``, e.g. ``include/reference/regions.csv``), or absolute."""
    schema_: str | None = Field(default=None, alias="schema")
    """Spark DDL; required for csv and json (nothing is inferred behind your back)."""
    options: dict[str, OptionValue] = Field(default_factory=dict)
    """Passed to Spark's reader as they are (``header: true`` for csv, ...)."""

    @model_validator(mode="after")
    def _schema(self) -> ReferenceTable:
        if self.format in ("csv", "json") and self.schema_ is None:
            raise ValueError(f'schema: required for {self.format} reference tables, e.g. schema: "code STRING, name STRING"')
        return self


class Transform(_Model):
    """Optional SQL over the input stream, which is the temp view ``source``."""

    sql: str | None = None
    """A Spark SQL query reading the temp view ``source``."""
    watermark: Watermark | None = None
    """``{column, delay}``: the event-time watermark, applied to the source before the SQL."""
    dedupe: list[str] | None = None
    """Drop a row whose values of these columns were seen before, within the watermark's delay (Spark's
    dropDuplicatesWithinWatermark): a re-delivered event is ingested once. Needs ``watermark``."""
    tables: dict[str, ReferenceTable] = Field(default_factory=dict)
    """Static tables the SQL can read (joins with a reference table), by temp view name:
    ``{format, path, schema, options}``; relative paths start at the project folder."""

    @field_validator("tables")
    @classmethod
    def _view_names(cls, value: dict[str, ReferenceTable]) -> dict[str, ReferenceTable]:
        for name in value:
            if not re.match(NAME_PATTERN, name) or name == "source":
                raise ValueError(f"{name!r} cannot name a temp view: use lower-case letters, digits and _, not source")
        return value

    @model_validator(mode="after")
    def _dedupe_needs_watermark(self) -> Transform:
        if self.dedupe is not None and not self.dedupe:
            raise ValueError("dedupe: name the columns that identify an event, e.g. dedupe: [order_id]")
        if self.dedupe and self.watermark is None:
            raise ValueError(
                "dedupe: needs a watermark (transform.watermark): without one, Spark would remember every key "
                "forever; the watermark's delay is how long a duplicate can arrive after the first copy"
            )
        return self

    @field_validator("sql")
    @classmethod
    def _reads_source(cls, value: str | None) -> str | None:
        if value is not None and not re.search(r"\bsource\b", value, re.IGNORECASE):
            raise ValueError("the query must read the input stream, the temp view `source` (… FROM source)")
        return value


MIB = 1024 * 1024


def _hinted_once(columns: list[tuple[str, str]]) -> None:
    names = [c.lower() for c, _ in columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"column(s) {', '.join(twice)} hinted twice; name each column once")


class SchemaInference(_Model):
    """How much of the landing folder the first run reads to infer a file source's schema."""

    max_files: Annotated[int, Field(gt=0)] = 50
    """At most this many files, the oldest first (the order the file source ingests them)."""
    max_bytes: Annotated[int, Field(gt=0)] = 50 * MIB
    """At most this many bytes of files (at least one file is read, whatever its size)."""


CleanMode = Literal["archive", "delete"]


class CleanSource(_Model):
    """What happens to a landing file once its rows are safely in the table (Spark's ``cleanSource``, done by
    sluice after the run, see docs/clean-source.md): it is moved to ``archive_dir`` or deleted, only after the
    batch that read it is committed in the Delta table AND in the checkpoint, and ``retention`` after that
    commit. Never by a dry run or a backfill; a run killed while cleaning leaves each file in the source
    folder or in the archive, and the next run finishes the job."""

    mode: CleanMode
    """``archive``: move the file to ``archive_dir``, keeping its path below the source folder; ``delete``:
    delete it."""
    archive_dir: str | None = None
    """``archive``: the folder the files go to, relative to the lake root (like ``source.path``) or absolute;
    neither inside the source folder nor holding it. Not used with ``delete``."""
    retention: str = "7d"
    """How long after its batch was committed a file stays in the source folder: a duration (``0s``, ``30m``,
    ``12h``, ``7d``); ``0`` cleans it in the run that ingested it."""

    @field_validator("retention", mode="before")
    @classmethod
    def _retention(cls, value: Any) -> Any:
        if value in (0, "0"):  # YAML gives 0 as an int
            return "0s"
        if isinstance(value, str):
            duration_seconds(value)
        return value

    @model_validator(mode="after")
    def _archive_dir(self) -> CleanSource:
        if self.mode == "archive" and not self.archive_dir:
            raise ValueError("archive_dir: required with mode: archive; name the folder the ingested files go to, "
                             "e.g. archive_dir: archive/orders (relative to the lake root)")
        if self.mode == "delete" and self.archive_dir:
            raise ValueError("archive_dir: only used with mode: archive (mode delete deletes the files); remove it "
                             "or set mode: archive")
        return self

    @property
    def retention_seconds(self) -> int:
        return duration_seconds(self.retention)


def archive_overlap_message(archive_dir: str, source_path: str) -> str:
    return (f"clean_source.archive_dir: {archive_dir} overlaps the source folder {source_path} (the same folder, "
            "or one inside the other): archived files would be read again as new input, or be moved onto "
            "files still landing. Name a folder outside it, e.g. archive/<pipeline name>")


def overlapping_folders(one: str, other: str) -> bool:
    """Whether two folders (paths or URIs, resolved the same way) are the same, or one holds the other."""
    one, other = (p.rstrip("/") if "://" in p else posixpath.normpath(p) for p in (one, other))
    return one == other or one.startswith(other + "/") or other.startswith(one + "/")


class FileSource(_Model):
    """Files landing in a folder, picked up once each by Spark's file stream source."""

    format: FileFormat
    """``json``, ``csv``, ``parquet`` or ``text`` (one ``value STRING`` column per line). The other source
    kinds: ``format: kafka`` (see docs/kafka.md) and ``format: delta`` (see docs/chains.md)."""
    path: str
    """Folder of input files: relative to the lake root, or absolute."""
    schema_: str | None = Field(default=None, alias="schema")
    """Spark DDL, e.g. ``id BIGINT, ts TIMESTAMP``. Optional for ``json``, ``csv`` and ``parquet``: without
    it, the first run infers the schema from a sample of the files (``inference``), stores it in the
    checkpoint (``schemas/0``) and every later run reads with the stored schema, never inferring again
    (see docs/schema-inference.md). Not allowed for ``text`` (always ``value STRING``)."""
    schema_hints: str | None = None
    """Without ``schema``: the types of named columns, as Spark DDL (``amount DECIMAL(12,2), ts TIMESTAMP``),
    over what the inference found (json, csv; parquet files carry their types); for json a hint naming a
    column the sample does not have adds it (csv values are matched by position: hint only columns the
    files have). Changed after the first run,
    the new hints are stored as the schema's next version (a changed type then meets the table's schema
    checks). With a declared ``schema``, write the types there instead."""
    inference: SchemaInference | None = None
    """Without ``schema``: how much the first run reads to infer it, ``{max_files: 50, max_bytes: 52428800}``
    (the oldest files first, the order the stream takes them). csv columns are inferred as STRING unless
    ``options.inferSchema: true``."""
    options: dict[str, OptionValue] = Field(default_factory=dict)
    """Passed to Spark's reader as they are (``header: true`` for csv, ``multiLine``, ...)."""
    max_files_per_trigger: Annotated[int, Field(gt=0)] | None = None
    """Rate limit: at most this many files per micro-batch (a run then executes several)."""
    on_overwrite: OnOverwrite = "warn"
    """A landing file rewritten in place after it was ingested (same name, new modification time), which
    Spark's file source would ignore: ``warn`` (reported in the run summary, the ledger and the log; its new
    content is not ingested), ``fail`` the run before anything is written, or ``reingest`` its records as new
    input, exactly once per version of the file (use a ``merge`` sink with keys so corrected rows replace
    the old ones; an ``append`` sink keeps both). See docs/data-quality.md."""
    clean_source: CleanSource | None = None
    """Archive or delete each landing file once its rows are committed and ``retention`` has passed:
    ``{mode: archive, archive_dir: archive/orders, retention: 7d}`` or ``{mode: delete, retention: 7d}``.
    Default: files stay where they landed. See docs/clean-source.md."""

    @field_validator("schema_")
    @classmethod
    def _ddl(cls, value: str | None) -> str | None:
        if value is not None and any(c.lower() == RESCUED_COLUMN for c, _ in _ddl_columns(value)):
            raise ValueError(
                f"column {RESCUED_COLUMN} is the column sluice adds for the fields a JSON record has beyond the "
                "schema; leave it out of the schema"
            )
        return value

    @model_validator(mode="after")
    def _archive_outside_source(self) -> FileSource:
        clean = self.clean_source
        if clean is None or clean.archive_dir is None:
            return self
        # both relative (to the lake root) or both absolute: comparable here; otherwise the run compares the
        # resolved folders (spark_jobs.clean_source)
        if "://" in clean.archive_dir or "://" in self.path or (
                posixpath.isabs(clean.archive_dir) == posixpath.isabs(self.path)):
            if overlapping_folders(clean.archive_dir, self.path):
                raise ValueError(archive_overlap_message(clean.archive_dir, self.path))
        return self

    @model_validator(mode="after")
    def _schema_required(self) -> FileSource:
        if self.format == "text" and self.schema_ is not None:
            raise ValueError("schema: text sources always have the one column `value STRING`; remove schema")
        for name in ("schema_hints", "inference"):
            if self.format == "text" and getattr(self, name) is not None:
                raise ValueError(f"{name}: text sources are one column `value STRING`, nothing is inferred; "
                                 f"remove {name}")
        if self.format == "parquet" and self.schema_hints is not None:
            raise ValueError("schema_hints: parquet files carry their columns' types, and the file source reads "
                             "them as they are (a DOUBLE cannot be read as a DECIMAL); remove schema_hints and "
                             "cast in transform.sql")
        if self.schema_ is not None and self.schema_hints is not None:
            raise ValueError("schema_hints: apply to an inferred schema; with a declared schema, write the "
                             "types in schema itself and remove schema_hints")
        if self.schema_ is not None and self.inference is not None:
            raise ValueError("inference: the schema is declared, nothing is inferred; remove inference (or "
                             "remove schema to have the first run infer it)")
        return self

    @field_validator("schema_hints")
    @classmethod
    def _hints(cls, value: str | None) -> str | None:
        if value is None:
            return value
        columns = _ddl_columns(value)
        if any(c.lower() == RESCUED_COLUMN for c, _ in columns):
            raise ValueError(f"column {RESCUED_COLUMN} is the column sluice adds; leave it out of the hints")
        _hinted_once(columns)
        return value

    def infers_schema(self) -> bool:
        """The schema is inferred by the first run and stored in the checkpoint (no ``schema`` declared)."""
        return self.format != "text" and self.schema_ is None


class DeltaSource(_Model):
    """A Delta table read as a stream: an upstream sluice pipeline's table (bronze -> silver -> gold), each
    run reading the commits since the last one, exactly once, with a checkpoint of its own."""

    format: Literal["delta"]
    """``delta``: a Delta table read as a stream (see docs/chains.md)."""
    pipeline: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    """The upstream pipeline, by name: its sink table is read (its spec must be in the pipelines folder)."""
    path: str | None = None
    """Or a Delta table's folder: relative to the lake root, or absolute."""
    max_files_per_trigger: Annotated[int, Field(gt=0)] | None = None
    """Rate limit: at most this many of the table's files per micro-batch."""
    skip_change_commits: bool = False
    """A commit that changes or deletes rows upstream (a backfill, MERGE, DELETE, a reset) is followed by
    default: the slice it names is rebuilt here, or this table is rebuilt whole (:mod:`spark_jobs.upstream`).
    ``true`` skips such commits: only appends flow down."""
    options: dict[str, OptionValue] = Field(default_factory=dict)
    """Passed to Delta's streaming source (``startingVersion``, ``maxBytesPerTrigger``, ...)."""

    @model_validator(mode="after")
    def _one_table(self) -> DeltaSource:
        if bool(self.pipeline) == bool(self.path):
            raise ValueError("pipeline: name the upstream pipeline (pipeline: orders_bronze) or a table path, "
                             "exactly one of them")
        return self


class AssetSchedule(_Model):
    """Run when an upstream pipeline's table was updated (its Airflow Asset)."""

    asset: str | list[str]
    """The upstream pipeline(s) by name; with several, the run waits until each has been updated."""

    @property
    def pipelines(self) -> list[str]:
        return [self.asset] if isinstance(self.asset, str) else list(self.asset)

    @field_validator("asset")
    @classmethod
    def _names(cls, value: str | list[str]) -> str | list[str]:
        names = [value] if isinstance(value, str) else value
        if not names:
            raise ValueError("name at least one upstream pipeline")
        bad = [n for n in names if not re.match(NAME_PATTERN, n)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a pipeline name (lower-case letters, digits, _)")
        return value


KAFKA_COLUMNS = ("key", "topic", "partition", "offset", "timestamp")


class KafkaSchemaInference(_Model):
    """How many records the first run reads to infer a Kafka json value's schema."""

    max_records: Annotated[int, Field(gt=0, le=100_000)] = 1000
    """At most this many records (values), read from ``starting_offsets`` (``latest``: the newest records)."""


class KafkaValue(_Model):
    """How to read the record value."""

    format: Literal["json", "string", "avro"] = "string"
    """``json``: parse into columns with ``schema`` (declared, or inferred by the first run); ``string``: one ``value STRING`` column; ``avro``: decode
    with the Avro schema in ``schema_file`` into its record's fields (see docs/kafka.md, "Avro values")."""
    schema_: str | None = Field(default=None, alias="schema")
    """Spark DDL of a ``json`` value's columns (not allowed for ``string``); it cannot name the columns sluice
    adds: ``key``, ``topic``, ``partition``, ``offset``, ``timestamp``, ``_rescued``. Optional for ``json``:
    without it, the first run infers the schema from a sample of the topic's records (``inference``), stores
    it in the checkpoint (``schemas/0``) and every later run reads with the stored schema, never inferring
    again (see docs/schema-inference.md)."""
    schema_hints: str | None = None
    """``json`` without ``schema``: the types of named columns, as Spark DDL (``amount DECIMAL(12,2), ts
    TIMESTAMP``), over what the inference found; a hint naming a field the sample does not have adds it.
    Changed after the first run, the new hints are stored as the schema's next version."""
    inference: KafkaSchemaInference | None = None
    """``json`` without ``schema``: how much the first run reads to infer it, ``{max_records: 1000}``: the
    first records from ``starting_offsets`` (``earliest`` or offsets per partition), or the newest records
    with ``latest``. Values that are not JSON objects are left out of the sample."""
    schema_file: str | None = None
    """``avro`` only, and required: the Avro schema (``.avsc``, JSON) the values were written with, a record
    whose fields become the columns; relative to the project folder (``SLUICE_HOME``, e.g.
    ``include/schemas/clicks.avsc``, like ``transform.tables``), or absolute. Read and checked when the spec is
    loaded."""
    wire_format: Literal["confluent", "plain"] | None = None
    """``avro`` only: ``confluent`` (the default): each value is Confluent's wire format, a magic byte 0, the
    schema id (4 bytes, big-endian), then the Avro body; ``plain``: the value is the Avro body only."""
    schema_ids: list[Annotated[int, Field(ge=0)]] | Literal["any"] | None = None
    """``avro`` with ``wire_format: confluent``, and required there: the schema ids (of the schema registry)
    whose records are decoded with ``schema_file``, e.g. ``[1, 2]``; a record with another id is a bad record.
    ``any`` accepts every id (the id is then not checked). Not allowed with ``plain``, which has no id."""

    _avro_schema: str | None = PrivateAttr(default=None)

    @field_validator("schema_")
    @classmethod
    def _ddl(cls, value: str | None) -> str | None:
        if value is None:
            return value
        clash = [c for c, _ in _ddl_columns(value) if c.lower() in (*KAFKA_COLUMNS, RESCUED_COLUMN)]
        if clash:
            raise ValueError(
                f"column(s) {', '.join(clash)} clash with the columns sluice adds for every record "
                f"({', '.join(KAFKA_COLUMNS)}, {RESCUED_COLUMN}); leave them out of the value schema"
            )
        return value

    @model_validator(mode="after")
    def _schema_for_json(self) -> KafkaValue:
        for name in ("schema_hints", "inference"):
            if self.format != "json" and getattr(self, name) is not None:
                raise ValueError(f"{name}: only for json values without a schema (nothing is inferred for "
                                 f"{self.format} values); remove {name}")
        if self.schema_ is not None and self.schema_hints is not None:
            raise ValueError("schema_hints: apply to an inferred schema; with a declared schema, write the "
                             "types in schema itself and remove schema_hints")
        if self.schema_ is not None and self.inference is not None:
            raise ValueError("inference: the schema is declared, nothing is inferred; remove inference (or "
                             "remove schema to have the first run infer it)")
        if self.format == "string" and self.schema_ is not None:
            raise ValueError("schema: string values are one column `value STRING`; remove schema or use format: json")
        if self.format != "avro":
            for name in ("schema_file", "wire_format", "schema_ids"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: only for avro values (format: avro), not {self.format}; remove it")
        return self

    @model_validator(mode="after")
    def _avro(self) -> KafkaValue:
        if self.format != "avro":
            return self
        if self.schema_ is not None:
            raise ValueError("schema: avro values take their columns from the Avro schema; remove schema and "
                             "name the .avsc file in schema_file")
        if self.schema_file is None:
            raise ValueError("schema_file: required for avro values: the Avro schema (.avsc) the values were "
                             "written with, e.g. schema_file: include/schemas/clicks.avsc")
        if self.wire_format == "plain" and self.schema_ids is not None:
            raise ValueError("schema_ids: plain Avro values carry no schema id; remove schema_ids, or use "
                             "wire_format: confluent")
        if self.wire_format != "plain" and self.schema_ids is None:
            raise ValueError("schema_ids: required with wire_format: confluent (the default): the schema ids whose "
                             "records schema_file decodes, e.g. schema_ids: [1], or schema_ids: any to accept "
                             "every id; or wire_format: plain for values without the 5-byte header")
        if self.schema_ids == []:
            raise ValueError("schema_ids: empty: name at least one id, or any to accept every id")
        try:
            text = read_avro_schema(self.avro_schema_path(), reserved=(*KAFKA_COLUMNS,))
        except AvroSchemaError as err:
            raise ValueError(f"schema_file: {err}") from None
        self._avro_schema = text
        return self

    @field_validator("schema_hints")
    @classmethod
    def _hints(cls, value: str | None) -> str | None:
        if value is None:
            return value
        columns = _ddl_columns(value)
        clash = [c for c, _ in columns if c.lower() in (*KAFKA_COLUMNS, RESCUED_COLUMN)]
        if clash:
            raise ValueError(
                f"column(s) {', '.join(clash)} clash with the columns sluice adds for every record "
                f"({', '.join(KAFKA_COLUMNS)}, {RESCUED_COLUMN}); leave them out of the hints"
            )
        _hinted_once(columns)
        return value

    def infers_schema(self) -> bool:
        """The value's schema is inferred by the first run and stored in the checkpoint (json, no ``schema``)."""
        return self.format == "json" and self.schema_ is None

    def avro_schema_path(self) -> Path:
        """``schema_file`` as a path: relative ones start at the project folder (``SLUICE_HOME``)."""
        path = Path(self.schema_file).expanduser()
        return path if path.is_absolute() else load_settings().home / path

    @property
    def avro_schema(self) -> str:
        """The Avro schema (compact JSON) read from ``schema_file`` when the spec was loaded."""
        if self._avro_schema is None:
            raise TypeError(f"value format {self.format} has no Avro schema")
        return self._avro_schema

    @property
    def confluent(self) -> bool:
        """Avro values in Confluent's wire format (the default wire format)."""
        return self.format == "avro" and self.wire_format != "plain"


class KafkaSource(_Model):
    """Kafka topics; each run reads the records that arrived since the last run (offsets in the checkpoint)."""

    format: Literal["kafka"]
    """``kafka``: Kafka topics (see docs/kafka.md)."""
    bootstrap_servers: str | None = None
    """``host:port[,host:port]``. Or name an Airflow ``connection`` instead."""
    connection: str | None = None
    """Airflow connection id holding the brokers (host, port) and security settings (login, password, extra)."""
    topics: list[str] | None = None
    """The topics to read, e.g. ``[clicks]``; name ``topics`` or a ``subscribe_pattern``, exactly one of them."""
    subscribe_pattern: str | None = None
    """A Java regex of topic names (instead of ``topics``)."""
    starting_offsets: str = "earliest"
    """``earliest``, ``latest`` or JSON per partition (``{"orders": {"0": 42}}``); the first run only."""
    max_offsets_per_trigger: Annotated[int, Field(gt=0)] | None = None
    """Rate limit: at most this many records per micro-batch (a run then executes several)."""
    value: KafkaValue = Field(default_factory=KafkaValue)
    """How to read the record value: ``{format: json, schema: ...}`` (or ``{format: json}``: the schema is
    inferred, see docs/schema-inference.md), ``{format: avro, schema_file: ...,
    schema_ids: [...]}``, or ``{format: string}`` (the default)."""
    options: dict[str, OptionValue] = Field(default_factory=dict)
    """Passed to Spark's Kafka source as they are: ``kafka.*`` client settings and connector options."""
    fail_on_data_loss: bool = True
    """A gap in the offsets (retention deleted records not yet read, a topic re-created) fails the run."""
    timeout_seconds: Annotated[int, Field(gt=0, le=600)] = 30
    """A broker that does not answer within this time fails the run (at start, and while fetching)."""

    @field_validator("starting_offsets", mode="before")
    @classmethod
    def _offsets(cls, value: Any) -> str:
        if isinstance(value, dict):
            return json.dumps(value)
        if value in ("earliest", "latest"):
            return value
        try:
            parsed = json.loads(value)
        except (TypeError, json.JSONDecodeError):
            parsed = None
        if not isinstance(parsed, dict):
            raise ValueError(
                f"{value!r} is not allowed; use earliest, latest, or offsets per partition as JSON "
                '({"topic": {"0": 42, "1": -2}}, -2 = earliest, -1 = latest)'
            )
        return value

    def infers_schema(self) -> bool:
        """The value's schema is inferred by the first run and stored in the checkpoint."""
        return self.value.infers_schema()

    @model_validator(mode="after")
    def _subscription(self) -> KafkaSource:
        if bool(self.topics) == bool(self.subscribe_pattern):
            raise ValueError("topics: name the topics (topics: [orders]) or a subscribe_pattern, exactly one of them")
        if not self.bootstrap_servers and not self.connection:
            raise ValueError(
                "bootstrap_servers: required (host:port), unless connection names an Airflow connection with the brokers"
            )
        reserved = sorted(k for k in self.options if k in _KAFKA_RESERVED_OPTIONS)
        if reserved:
            raise ValueError(
                f"options: {', '.join(reserved)} are set from the spec's own fields "
                "(bootstrap_servers, topics, subscribe_pattern, starting_offsets, max_offsets_per_trigger, "
                "fail_on_data_loss); set them there"
            )
        return self


_KAFKA_RESERVED_OPTIONS = {
    "kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign", "startingOffsets",
    "maxOffsetsPerTrigger", "failOnDataLoss",
}


class Sink(_Model):
    """The Delta table the pipeline writes."""

    path: str | None = None
    """Table folder: relative to the lake root, or absolute. Default: ``<lake root>/<name>``."""
    mode: SinkMode = "append"
    """``append`` adds each micro-batch's rows; ``complete`` rewrites the table with a stateful query's result;
    ``merge`` upserts each micro-batch into the table by ``keys`` (Delta MERGE); ``scd2`` keeps every
    version of each key (SCD type 2: ``__start_at`` / ``__end_at`` columns, see docs/scd2.md)."""
    partition_by: list[str] = Field(default_factory=list)
    """Partition columns of the table."""
    keys: list[str] = Field(default_factory=list)
    """``merge``: the columns that identify a row (one row per key in the table). ``scd2``: the columns that
    identify an entity (one row per version of it, at most one current row)."""
    order_by: str | None = None
    """``merge``: a column whose greatest value wins, among a batch's rows of one key and against the table's
    row (an older change never overwrites a newer one). Without it, the batch's last row of a key wins."""
    delete_when: str | None = None
    """``merge``, ``scd2``: a Spark SQL predicate over the incoming row that marks it a deletion (CDC feeds),
    e.g. ``op = 'D'``: the key's row is deleted (``scd2``: its current version is ended at the deletion's
    ``sequence_by``); such a row is never inserted."""
    sequence_by: str | None = None
    """``scd2``: the column that orders a key's changes (a version number or change timestamp; required).
    Each version's ``__start_at`` / ``__end_at`` have its type. A change that arrives late is put in its
    place in the key's history, never applied over a newer one; a row whose value is NULL is a bad record."""
    track_history_columns: list[str] = Field(default_factory=list)
    """``scd2``: only a change of these columns starts a new version; a change of other columns updates the
    version it falls in, in place. Default: all columns but the keys and ``sequence_by``."""
    except_columns: list[str] = Field(default_factory=list)
    """``scd2``: the columns whose change does NOT start a new version (all others do, but the keys and
    ``sequence_by``); the other way to say ``track_history_columns``, not with it."""

    @model_validator(mode="after")
    def _merge_fields(self) -> Sink:
        if self.mode in ("merge", "scd2"):
            if not self.keys:
                raise ValueError(f"keys: required with mode: {self.mode}; name the key columns, e.g. keys: [order_id]")
            if len(set(self.keys)) != len(self.keys):
                raise ValueError(f"keys: {self.keys} names a column twice")
        if self.mode == "merge":
            if self.order_by in self.keys:
                raise ValueError(f"order_by: {self.order_by!r} is a key column; name the version/timestamp column")
        elif self.mode != "scd2":
            extra = [f for f in ("keys", "order_by", "delete_when") if getattr(self, f)]
            if extra:
                raise ValueError(
                    f"{extra[0]}: only used with mode: merge (the sink's mode is {self.mode}); "
                    "remove it or set mode: merge (or scd2)"
                )
        if self.mode == "scd2":
            self._scd2_fields()
        else:
            extra = [f for f in ("sequence_by", "track_history_columns", "except_columns") if getattr(self, f)]
            if extra:
                raise ValueError(
                    f"{extra[0]}: only used with mode: scd2 (the sink's mode is {self.mode}); "
                    "remove it or set mode: scd2"
                )
        return self

    def _scd2_fields(self) -> None:
        if self.order_by:
            raise ValueError("order_by: a merge sink's field; with mode: scd2 name the column that orders a key's "
                             f"changes in sequence_by (e.g. sequence_by: {self.order_by})")
        if not self.sequence_by:
            raise ValueError("sequence_by: required with mode: scd2; name the column that orders a key's changes "
                             "(a version number or change timestamp), e.g. sequence_by: updated_at")
        if self.sequence_by in self.keys:
            raise ValueError(f"sequence_by: {self.sequence_by!r} is a key column; name the version/timestamp column")
        if self.track_history_columns and self.except_columns:
            raise ValueError("track_history_columns: set either track_history_columns (the columns that start a "
                             "new version) or except_columns (the columns that do not), not both")
        for field in ("track_history_columns", "except_columns"):
            columns = getattr(self, field)
            keys = [c for c in columns if c in self.keys]
            if keys:
                raise ValueError(f"{field}: {', '.join(keys)} is a key column; a key's versions all have the "
                                 "same key, remove it")
            if len(set(columns)) != len(columns):
                raise ValueError(f"{field}: {columns} names a column twice")
        if SCD2_START in self.keys or SCD2_END in self.keys or self.sequence_by in (SCD2_START, SCD2_END):
            raise ValueError(f"keys: {SCD2_START} and {SCD2_END} are the columns the scd2 sink adds; rename the "
                             "column in transform.sql")


class Expectation(_Model):
    """A rule every transformed row should meet, checked on each micro-batch before it is committed."""

    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=100)]
    """Names the rule in the run summary, the ledger and the quarantine table's ``expectation`` column;
    unique within the spec."""
    rule: str
    """A Spark SQL boolean over the transformed row, e.g. ``amount > 0``. NULL counts as a violation."""
    on_violation: OnViolation = "warn"
    """``warn``: count and keep the row; ``drop``: count and leave it out; ``quarantine``: move it to the
    quarantine table; ``fail``: fail the run before the batch is committed (the checkpoint stays put)."""

    @field_validator("rule")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a Spark SQL boolean is required, e.g. rule: \"amount > 0\"")
        return value.strip()


_BACKFILL_PLACEHOLDER_RE = re.compile(r"\{\{\s*(\w+)\s*\}\}")
BACKFILL_PLACEHOLDERS = {"ds": "%Y-%m-%d", "ds_nodash": "%Y%m%d"}


DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """``90s``, ``30m``, ``2h``, ``1d`` as seconds; ValueError otherwise."""
    found = DURATION.match(str(text))
    if found is None:
        raise ValueError(f"{text!r} is not a duration: write a number and a unit, e.g. 30m, 2h, 1d (units: s, m, h, d)")
    return int(found[1]) * DURATION_UNITS[found[2]]


class Freshness(_Model):
    """How old the pipeline's newest committed data may be before it is an alert (the ``sluice_freshness``
    DAG checks every pipeline that has this section; see docs/operations.md)."""

    warn_after: str
    """A duration (``30m``, ``2h``, ``1d``): older than this, the check warns (an alert, the task succeeds)."""
    error_after: str | None = None
    """A longer duration: older than this, the check alerts and its task fails."""
    notify: str | None = None
    """The Airflow connection the alert goes to: type ``http`` (a webhook: the alert is POSTed as JSON) or
    ``smtp`` (mail to its extra ``to``). Default: ``SLUICE_ALERT_CONN_ID``; neither: the task log only."""

    @field_validator("warn_after", "error_after")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            duration_seconds(value)
        return value

    @model_validator(mode="after")
    def _order(self) -> Freshness:
        if self.error_after is not None and duration_seconds(self.error_after) <= duration_seconds(self.warn_after):
            raise ValueError(f"error_after ({self.error_after}) must be longer than warn_after ({self.warn_after})")
        return self


class Backfill(_Model):
    """How a backfill run rebuilds one slice (a range of days) of the sink table."""

    column: str
    """The sink column that holds a row's date (DATE, TIMESTAMP, or 'YYYY-MM-DD' STRING): the slice's rows
    are replaced (Delta replaceWhere on it). Best a ``sink.partition_by`` column."""
    path: str | None = None
    """File sources: the folder of ONE day's files, with ``{{ ds }}`` (2026-11-01) or ``{{ ds_nodash }}``
    (20261101), relative to the lake root or absolute, e.g. ``landing/orders/dt={{ ds }}``. Kafka sources
    have none: the slice is the records whose timestamp falls in it."""

    @field_validator("path")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return value
        names = _BACKFILL_PLACEHOLDER_RE.findall(value)
        unknown = sorted(set(names) - set(BACKFILL_PLACEHOLDERS))
        if unknown:
            raise ValueError(
                f"{value!r} uses {', '.join('{{ ' + n + ' }}' for n in unknown)}; the placeholders are "
                "{{ ds }} (2026-11-01) and {{ ds_nodash }} (20261101)"
            )
        if not names:
            raise ValueError(
                f"{value!r} has no {{{{ ds }}}}: every day of a backfill would read the same folder; write the "
                "folder of one day, e.g. landing/orders/dt={{ ds }}"
            )
        return value

    def path_for(self, day) -> str:
        """``path`` for one day (a ``datetime.date``)."""
        return _BACKFILL_PLACEHOLDER_RE.sub(lambda m: day.strftime(BACKFILL_PLACEHOLDERS[m.group(1)]), self.path or "")


DELTA_SAFE_RETENTION_HOURS = 168
"""Delta's own safety default for VACUUM (``delta.deletedFileRetentionDuration``, 7 days)."""


class Maintenance(_Model):
    """What the maintenance DAG (``sluice_maintenance``) does to the pipeline's tables, and how much of its
    checkpoint's history the runs keep."""

    enabled: bool = True
    """false: the maintenance DAG leaves this pipeline alone."""
    optimize: bool = True
    """Compact the sink's (and quarantine table's) small files: Delta OPTIMIZE; one-shot runs write a few
    small files each."""
    zorder_by: list[str] = Field(default_factory=list)
    """OPTIMIZE ... ZORDER BY these columns (not the partition columns)."""
    vacuum: bool = True
    """Delete files the table no longer references once they are older than ``vacuum_retention_hours``."""
    vacuum_retention_hours: Annotated[int, Field(ge=0)] = DELTA_SAFE_RETENTION_HOURS
    """Never below Delta's safety default (168 h = 7 days) unless ``force_retention: true``: a reader, a dry
    run's clone or a time-travel query may still use the older files."""
    force_retention: bool = False
    """``true`` allows a ``vacuum_retention_hours`` below 168."""
    checkpoint_batches_to_retain: Annotated[int, Field(ge=2)] = 100
    """The checkpoint keeps the offsets and commits of this many batches (Spark's
    ``spark.sql.streaming.minBatchesToRetain``) and drops older ones, so a checkpoint does not grow over
    thousands of runs."""

    @model_validator(mode="after")
    def _safe_retention(self) -> Maintenance:
        if self.vacuum_retention_hours < DELTA_SAFE_RETENTION_HOURS and not self.force_retention:
            raise ValueError(
                f"vacuum_retention_hours: {self.vacuum_retention_hours} is below Delta's safety default of "
                f"{DELTA_SAFE_RETENTION_HOURS} h (7 days): a reader, a dry run's clone or a time-travel query "
                "still using older files would fail. Use at least 168, or add force_retention: true if you "
                "accept that"
            )
        return self


class PipelineSpec(_Model):
    """One pipeline: a source, an optional transform, one Delta sink, one checkpoint."""

    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=200)]
    """dag_id, and the default table and checkpoint folder names."""
    description: str | None = None
    """Shown as the DAG's documentation in Airflow."""
    schedule: str | AssetSchedule | None = None
    """Any Airflow schedule (cron, ``@hourly``, ``@daily``, ``@continuous``, ...); ``{asset: <upstream
    pipeline>}`` to run when that pipeline's table was updated (see docs/chains.md); null = manual runs only."""
    trigger: Trigger = "available_now"
    """``available_now`` reads everything new, in as many micro-batches as the rate limits make, then runs a
    no-data batch; ``once`` reads it in ONE micro-batch, ignores rate limits and runs no no-data batch: with a
    stateful append query, windows the watermark has passed are then written only when new data arrives, not
    by a run that finds nothing new (``sluice validate`` warns about that combination)."""
    source: Annotated[FileSource | KafkaSource | DeltaSource, Field(discriminator="format")]
    """Where records come from; its ``format`` picks the kind: files (``json``, ``csv``, ``parquet``,
    ``text``), ``kafka`` or ``delta``."""
    transform: Transform | None = None
    """Optional SQL over the source (the temp view ``source``), watermark, dedupe and reference tables;
    without it the source's rows are written as they are."""
    sink: Sink = Field(default_factory=Sink)
    """The Delta table the pipeline writes; by default ``<lake root>/<name>``, appended to."""
    checkpoint: str | None = None
    """Checkpoint folder: default ``<checkpoint root>/<name>``; absolute paths allowed."""
    retries: Annotated[int, Field(ge=0)] = 1
    """How often Airflow retries a failed run (safe: a retry resumes from the checkpoint)."""
    retry_delay_seconds: Annotated[int, Field(ge=0)] = 30
    """Seconds Airflow waits before retrying a failed run."""
    spark_conf: dict[str, OptionValue] = Field(default_factory=dict)
    """Extra ``--conf`` settings for this pipeline's spark-submit (they override sluice's defaults)."""
    on_bad_records: OnBadRecords = "quarantine"
    """A record that does not parse or does not fit the schema (json, csv, Kafka json and avro values):
    ``quarantine`` it (raw text, source, error) in the quarantine table; ``fail`` the run before the batch is committed;
    or ``drop`` it (still counted in the run summary). See docs/data-quality.md."""
    quarantine_path: str | None = None
    """The quarantine Delta table: relative to the lake root, or absolute. Default ``_quarantine/<name>``."""
    expectations: list[Expectation] = Field(default_factory=list)
    """Rules checked on every micro-batch before it is committed (see docs/data-quality.md)."""
    schema_evolution: SchemaEvolution = "rescue"
    """JSON sources, fields the schema does not declare: ``rescue`` keeps them in the ``_rescued`` column
    (JSON text; the table's schema never changes by itself); ``add_columns`` adds them to the table as new
    columns (types inferred, Delta schema merge); ``fail`` fails the run before the batch is committed.
    Changing ``source.schema`` itself: see docs/data-quality.md."""
    backfill: Backfill | None = None
    """Lets a backfill run (Airflow backfill, or ``mode: backfill``) rebuild a slice of days of the table
    (see docs/operations.md)."""
    maintenance: Maintenance = Field(default_factory=Maintenance)
    """OPTIMIZE and VACUUM by the maintenance DAG, checkpoint history kept."""
    freshness: Freshness | None = None
    """Alert when the newest committed data is older than this (``{warn_after: 2h, error_after: 6h}``)."""

    @field_validator("schedule")
    @classmethod
    def _airflow_schedule(cls, value: str | AssetSchedule | None) -> str | AssetSchedule | None:
        # Checked here, not by Airflow at parse time: an invalid schedule would fail the DAG file that
        # builds every pipeline's DAG, hiding all of them.
        if value is None or isinstance(value, AssetSchedule) or value in SCHEDULE_PRESETS:
            return value
        from croniter import (
            croniter,  # Airflow's own cron parser, a dependency of Airflow
        )

        if not croniter.is_valid(value):
            raise ValueError(
                f"{value!r} is neither a cron expression ('0 * * * *') nor one of {', '.join(SCHEDULE_PRESETS)}; "
                "use null for manual runs only"
            )
        return value

    @model_validator(mode="after")
    def _quality_fields(self) -> PipelineSpec:
        names = [e.name for e in self.expectations]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"expectations: the name(s) {', '.join(twice)} are used twice; names are unique")
        json_source = self.source.format == "json" or (
            isinstance(self.source, KafkaSource) and self.source.value.format == "json"
        )
        if self.schema_evolution != "rescue" and not json_source:
            raise ValueError(
                f"schema_evolution: {self.schema_evolution} applies to JSON sources (json files, Kafka json "
                f"values), not to {self.source.format}; remove it"
            )
        if self.schema_evolution == "add_columns" and self.is_stateful():
            raise ValueError(
                "schema_evolution: add_columns cannot add columns to a stateful query's result (aggregation, "
                "distinct, join or window in transform.sql); use rescue (the default)"
            )
        return self

    @model_validator(mode="after")
    def _reingest_is_stateless(self) -> PipelineSpec:
        if isinstance(self.source, FileSource) and self.source.on_overwrite == "reingest" and self.is_stateful():
            raise ValueError(
                "source.on_overwrite: reingest feeds a rewritten file's records to the table again, outside the "
                "query's state (aggregation, distinct, join, window, watermark or dedupe in transform): its "
                "results would be wrong. Use warn or fail, and run once in mode reset to rebuild the table "
                "from the files as they are now"
            )
        return self

    @model_validator(mode="after")
    def _backfill_fits(self) -> PipelineSpec:
        backfill = self.backfill
        if backfill is None:
            return self
        if self.sink.mode == "scd2":
            raise ValueError(
                "backfill: an scd2 sink keeps every key's history across all days, so a slice of days has no rows "
                "of its own to replace. Remove backfill; to rebuild the history, run once with "
                "--reset-checkpoint (Airflow: trigger with mode=reset)"
            )
        if self.sink.mode == "complete":
            raise ValueError(
                "backfill: a complete sink rewrites the whole table on every run; there is no slice to rebuild. "
                "Remove backfill, or use sink.mode append or merge"
            )
        if isinstance(self.source, DeltaSource):
            if backfill.path is not None:
                raise ValueError(
                    "backfill.path: a delta source has no folders; a slice is the upstream table's rows whose "
                    f"{backfill.column} falls in it (the upstream table needs that column). Remove backfill.path"
                )
            return self
        if isinstance(self.source, KafkaSource) and backfill.path is not None:
            raise ValueError("backfill.path: a Kafka source has no folders; a slice is the records whose "
                             "timestamp falls in it. Remove backfill.path")
        if not isinstance(self.source, KafkaSource) and backfill.path is None:
            raise ValueError(
                "backfill.path: required for file sources: the folder of one day's files, with {{ ds }}, "
                f"e.g. {self.source.path.rstrip('/')}/dt={{{{ ds }}}}"
            )
        return self

    @model_validator(mode="after")
    def _zorder_not_partition(self) -> PipelineSpec:
        clash = [c for c in self.maintenance.zorder_by if c in self.sink.partition_by]
        if clash:
            raise ValueError(
                f"maintenance.zorder_by: {', '.join(clash)} is a partition column (sink.partition_by); Delta "
                "Z-orders within partitions, so name other columns (e.g. the ones queries filter on)"
            )
        return self

    def is_stateful(self) -> bool:
        """The transform keeps state across micro-batches (aggregation, distinct, join, window, watermark)."""
        transform = self.transform
        sql = transform.sql if transform else None
        return stateful_sql(sql) or bool(transform and (transform.watermark or transform.dedupe))

    def parses_records(self) -> bool:
        """The source parses records into the schema's columns, so a record can be bad (json, csv, Kafka json
        and avro)."""
        if isinstance(self.source, KafkaSource):
            return self.source.value.format in ("json", "avro")
        return self.source.format in ("json", "csv")

    def upstream_pipelines(self) -> list[str]:
        """Pipelines this one reads (a delta source) or is scheduled by (an asset schedule)."""
        names = [self.source.pipeline] if isinstance(self.source, DeltaSource) and self.source.pipeline else []
        if isinstance(self.schedule, AssetSchedule):
            names += [n for n in self.schedule.pipelines if n not in names]
        return names

    def rescues_fields(self) -> bool:
        """Fields the schema does not declare are kept (``_rescued``) or added: JSON lines and Kafka JSON."""
        if isinstance(self.source, KafkaSource):
            return self.source.value.format == "json"
        if isinstance(self.source, DeltaSource):
            return False
        return self.source.format == "json" and not _truthy(self.source.options.get("multiLine"))

    @model_validator(mode="after")
    def _complete_needs_aggregation(self) -> PipelineSpec:
        if self.sink.mode == "complete" and not (self.transform and self.transform.sql):
            raise ValueError(
                "sink.mode: complete needs a transform.sql with an aggregation (GROUP BY); "
                "use mode: append to copy the source as it is"
            )
        return self

    # --- derived locations -------------------------------------------------------------------------

    def source_path(self, settings: Settings) -> str:
        if isinstance(self.source, KafkaSource):
            raise TypeError("a kafka source has no path")
        if isinstance(self.source, DeltaSource) and self.source.pipeline and not self.source.path:
            # the folder knows the upstream pipeline's table: sluice.catalog fills source.path, once
            raise SpecError(self.name, [f"source.pipeline: {self.source.pipeline!r} is not resolved to its table; "
                                        "load the spec with sluice.catalog.resolve_upstream"])
        return _resolve(self.source.path, settings.lake_root)

    def sink_path(self, settings: Settings) -> str:
        return _resolve(self.sink.path or self.name, settings.lake_root)

    def checkpoint_path(self, settings: Settings) -> str:
        return _resolve(self.checkpoint or self.name, settings.checkpoint_root)

    def archive_path(self, settings: Settings) -> str | None:
        """``source.clean_source.archive_dir`` resolved like ``source.path``; None without one."""
        clean = getattr(self.source, "clean_source", None)
        return _resolve(clean.archive_dir, settings.lake_root) if clean and clean.archive_dir else None

    def quarantine_table_path(self, settings: Settings) -> str:
        return _resolve(self.quarantine_path or f"_quarantine/{self.name}", settings.lake_root)

    # --- advice that is not an error -------------------------------------------------------------

    def warnings(self) -> list[str]:
        """Things that are valid but likely not what the user wants."""
        found = []
        sql = self.transform.sql if self.transform else None
        stateful = stateful_sql(sql)
        if self.trigger == "once" and self.sink.mode == "append" and stateful and self.transform.watermark:
            found.append(
                "trigger: once with a stateful append query: Trigger.Once runs no no-data batch, so windows "
                "that the watermark has passed are only written when NEW data arrives, not by a run that finds "
                "nothing new. Use trigger: available_now (the default), which does run it."
            )
        return found


def _truthy(value: OptionValue | None) -> bool:
    return str(value).strip().lower() == "true"


def _resolve(path: str, root: Path | str) -> str:
    if "://" in path:  # a URI (s3a://, abfss://, file://): used as it is
        return path
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return str(candidate)
    if not isinstance(root, Path):  # a root on an object store: the path is a key under it
        return posixpath.join(root.rstrip("/"), posixpath.normpath(path))
    return str((root / candidate).resolve())


# --- loading -------------------------------------------------------------------------------------

def parse_spec(data: Any, source: str = "<spec>") -> PipelineSpec:
    """Validate an already-loaded YAML document."""
    if not isinstance(data, dict):
        raise SpecError(source, [f"the spec must be a YAML mapping of fields, not {type(data).__name__}"])
    try:
        return PipelineSpec.model_validate(data)
    except ValidationError as err:
        errors = err.errors()
        # a mapping given for `schedule` is an asset schedule: the "not a string" error of the other union
        # member says nothing useful
        errors = [e for e in errors if not (e["loc"][-1:] == ("str",) and isinstance(e.get("input"), dict))] or errors
        raise SpecError(source, [describe(e) for e in errors]) from None


def load_spec(path: str | Path) -> PipelineSpec:
    """Read and validate one spec file."""
    path = Path(path)
    source = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(source, ["no such file"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SpecError(source, [f"not valid YAML: {err}"]) from None
    return parse_spec(data, source)


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
