"""The spec's ``source:``: files (and their clean-up), a Delta table upstream, Kafka (and its value's format)."""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from sluice.settings import load_settings
from sluice.spec.avro import AvroSchemaError, read_avro_schema
from sluice.spec.common import (
    NAME_PATTERN,
    RESCUED_COLUMN,
    CleanMode,
    FileFormat,
    OnOverwrite,
    OptionValue,
    _ddl_columns,
    _Model,
    duration_seconds,
    table_name,
)

MIB = 1024 * 1024


def _hinted_once(columns: list[tuple[str, str]]) -> None:
    names = [c.lower() for c, _ in columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"column(s) {', '.join(twice)} hinted twice; name each column once")


def _declared_or_inferred(schema: str | None, hints: str | None, inference: object) -> None:
    """A declared schema leaves nothing to infer: ``schema_hints`` and ``inference`` only go with no schema."""
    if schema is not None and hints is not None:
        raise ValueError("schema_hints: apply to an inferred schema; with a declared schema, write the "
                         "types in schema itself and remove schema_hints")
    if schema is not None and inference is not None:
        raise ValueError("inference: the schema is declared, nothing is inferred; remove inference (or "
                         "remove schema to have the first run infer it)")


def _checked_hints(value: str | None, reserved: tuple[str, ...], refusal) -> str | None:
    """``schema_hints``: a DDL list that names each column once and none of ``reserved`` (the columns sluice
    adds; ``refusal(clashing names)`` is the error)."""
    if value is None:
        return value
    columns = _ddl_columns(value)
    clash = [c for c, _ in columns if c.lower() in reserved]
    if clash:
        raise ValueError(refusal(clash))
    _hinted_once(columns)
    return value


class SchemaInference(_Model):
    """How much of the landing folder the first run reads to infer a file source's schema."""

    max_files: Annotated[int, Field(gt=0)] = 50
    """At most this many files, the oldest first (the order the file source ingests them)."""
    max_bytes: Annotated[int, Field(gt=0)] = 50 * MIB
    """At most this many bytes of files (at least one file is read, whatever its size)."""


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
    discovery: Literal["index", "spark"] = "index"
    """How a run finds the new files. ``index`` (the default): sluice's own discovery, whose cost is the new
    files' and not the folder's history: the checkpoint keeps a compact index of every file found (a
    128-bit digest a file), and a run reads the folder's names and looks only at the new ones (in a bucket:
    one listing, 1,000 objects a request). ``spark``: Spark's own file source, which restores a log entry
    for every file it has ever read at each start and lists the whole folder for each batch. Both keep the
    same log in the checkpoint: a pipeline moves from one to the other (either way) without a file read
    twice or missed. See docs/performance.md."""
    listing: Literal["full", "incremental"] = "full"
    """Which names a run lists (``discovery: index``). ``full`` (the default): every name. ``incremental``: the
    names that sort after a high-water mark (a bucket: ``ListObjectsV2`` with ``StartAfter``, one request for
    the tail of any folder), for names that sort as files land (``2026-12-06T10.json``, ``date=2026-12-06/``).
    The mark: the highest name seen by listings started ``look_back`` or more before. A file landing with a
    name below it is read by the next full listing (every ``full_listing_every``): late, never lost. The
    rewritten-file check and the backlog look at the names listed. No glob in ``path`` (use
    ``options.pathGlobFilter``). See docs/performance.md."""
    look_back: str = "1h"
    """``listing: incremental``: the age of the mark a run lists after (``0s``, ``30m``, ``1h``, ``2d``): the
    latest a file may land after higher names were read, plus the schedule's interval. Until a listing that
    old exists, runs list every name."""
    full_listing_every: str = "1d"
    """``listing: incremental``: how often a run lists every name (``12h``, ``1d``), reading files that landed
    later than ``look_back`` allows and rewrites of any name."""
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
        # resolved folders (spark_jobs.run.clean_source)
        if "://" in clean.archive_dir or "://" in self.path or (
                posixpath.isabs(clean.archive_dir) == posixpath.isabs(self.path)):
            if overlapping_folders(clean.archive_dir, self.path):
                raise ValueError(archive_overlap_message(clean.archive_dir, self.path))
        return self

    @field_validator("look_back", "full_listing_every", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> Any:
        return CleanSource._retention(value)

    @model_validator(mode="after")
    def _incremental_listing(self) -> FileSource:
        given = [name for name in ("full_listing_every", "look_back")  # a default given back (a dump) is no use
                 if getattr(self, name) != type(self).model_fields[name].default]
        if self.listing == "full" and given:
            raise ValueError(f"{', '.join(given)}: only used with listing: incremental; set listing: incremental "
                             f"or remove {' and '.join(given)}")
        if self.listing == "incremental" and self.discovery != "index":
            raise ValueError("listing: incremental is sluice's discovery (discovery: index); Spark's file source "
                             "(discovery: spark) lists every name: remove listing or set discovery: index")
        if self.listing == "incremental" and re.search(r"[*?\[{]", self.path):  # SparkHadoopUtil.isGlobPath
            raise ValueError(f"listing: incremental lists one folder's names after a mark; path {self.path} is a "
                             "glob: give the folder as path and keep files by name with options.pathGlobFilter, "
                             "or set listing: full")
        if self.listing == "incremental" and duration_seconds(self.full_listing_every) <= 0:
            raise ValueError("full_listing_every: give a positive duration (e.g. 1d): a full listing is how a file "
                             "landed later than look_back is read")
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
        _declared_or_inferred(self.schema_, self.schema_hints, self.inference)
        return self

    @field_validator("schema_hints")
    @classmethod
    def _hints(cls, value: str | None) -> str | None:
        return _checked_hints(value, (RESCUED_COLUMN,), lambda _: f"column {RESCUED_COLUMN} is the column sluice "
                              "adds; leave it out of the hints")

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
    table: str | None = None
    """Or a table's name, ``schema.table``: the table of the pipeline of the folder that has this name (its
    ``sink.table``), else the folder the catalog registers under it, looked up by the run."""
    max_files_per_trigger: Annotated[int, Field(gt=0)] | None = None
    """Rate limit: at most this many of the table's files per micro-batch."""
    skip_change_commits: bool = False
    """A commit that changes or deletes rows upstream (a backfill, MERGE, DELETE, a reset) is followed by
    default: the slice it names is rebuilt here, or this table is rebuilt whole (:mod:`spark_jobs.corrections.upstream`).
    ``true`` skips such commits: only appends flow down."""
    options: dict[str, OptionValue] = Field(default_factory=dict)
    """Passed to Delta's streaming source (``startingVersion``, ``maxBytesPerTrigger``, ...)."""

    @field_validator("table")
    @classmethod
    def _table_name(cls, value: str | None) -> str | None:
        return None if value is None else table_name(value)

    @model_validator(mode="after")
    def _one_table(self) -> DeltaSource:
        if sum(bool(v) for v in (self.pipeline, self.path, self.table)) != 1:
            raise ValueError("pipeline: name the upstream pipeline (pipeline: orders_bronze), a table path, or a "
                             "table's name (table: bronze.orders), exactly one of them")
        return self


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
        _declared_or_inferred(self.schema_, self.schema_hints, self.inference)
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
        return _checked_hints(value, (*KAFKA_COLUMNS, RESCUED_COLUMN), lambda clash: (
            f"column(s) {', '.join(clash)} clash with the columns sluice adds for every record "
            f"({', '.join(KAFKA_COLUMNS)}, {RESCUED_COLUMN}); leave them out of the hints"))

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
