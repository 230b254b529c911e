"""The whole pipeline spec (:class:`PipelineSpec`) and loading it from YAML: :func:`load_spec`, :func:`parse_spec`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from sluice.settings import Settings
from sluice.spec.common import (
    NAME_PATTERN,
    SCHEDULE_PRESETS,
    OnBadRecords,
    OptionValue,
    SchemaEvolution,
    Trigger,
    _Model,
    _resolve,
    _truthy,
    stateful_sql,
    table_name,
)
from sluice.spec.errors import SpecError, describe
from sluice.spec.quality import Expectation
from sluice.spec.schedule import AssetSchedule, Backfill, Freshness
from sluice.spec.sinks import Maintenance, Sink
from sluice.spec.sources import DeltaSource, FileSource, KafkaSource
from sluice.spec.transform import Transform


class PipelineSpec(_Model):
    """One pipeline: a source, an optional transform, one Delta sink, one checkpoint."""

    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=200)]
    """dag_id, and the default table and checkpoint folder names."""
    previous_names: list[Annotated[str, Field(pattern=NAME_PATTERN, max_length=200)]] = Field(default_factory=list)
    """The names this pipeline had before, oldest first: a renamed pipeline keeps its table, checkpoint, lock,
    transactions and run history, which stay under its first name (its ``identity``), and ``sluice status``
    shows the runs of every name. Give every earlier name, in order (see docs/operations.md, "Renaming a
    pipeline")."""
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
    """The Delta table the pipeline writes; by default ``<lake root>/<name>`` (the first name, for a renamed
    pipeline: ``previous_names``), appended to."""
    checkpoint: str | None = None
    """Checkpoint folder: default ``<checkpoint root>/<name>`` (the first name, for a renamed pipeline);
    absolute paths allowed."""
    retries: Annotated[int, Field(ge=0)] = 1
    """How often Airflow retries a failed run (safe: a retry resumes from the checkpoint)."""
    retry_delay_seconds: Annotated[int, Field(ge=0)] = 30
    """Seconds Airflow waits before retrying a failed run."""
    priority: Annotated[int, Field(ge=1, le=1000)] = 1
    """Which runs start first when more are due than the Airflow pool has slots (``SLUICE_AIRFLOW_POOL``, one
    slot per spark-submit): a higher number goes first (the task's ``priority_weight``); equal ones in the order
    Airflow queued them."""
    spark_conf: dict[str, OptionValue] = Field(default_factory=dict)
    """Extra ``--conf`` settings for this pipeline's spark-submit (they override sluice's defaults)."""
    on_bad_records: OnBadRecords = "quarantine"
    """A record that does not parse or does not fit the schema (json, csv, Kafka json and avro values):
    ``quarantine`` it (raw text, source, error) in the quarantine table; ``fail`` the run before the batch is committed;
    or ``drop`` it (still counted in the run summary). See docs/data-quality.md."""
    quarantine_path: str | None = None
    """The quarantine Delta table: relative to the lake root, or absolute. Default ``_quarantine/<name>`` (the
    first name, for a renamed pipeline)."""
    quarantine_table: str | None = None
    """The quarantine table's name in the catalog, ``schema.table``. Default, when the sink table has a name:
    that name with ``_quarantine`` (``bronze.orders_quarantine``); registered once the quarantine table exists."""
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
        # croniter: Airflow's own cron parser, a dependency of Airflow
        from croniter import croniter

        if croniter.is_valid(value):
            return value
        raise ValueError(f"{value!r} is neither a cron expression ('0 * * * *') nor one of "
                         f"{', '.join(SCHEDULE_PRESETS)}; use null for manual runs only")

    @field_validator("quarantine_table")
    @classmethod
    def _quarantine_name(cls, value: str | None) -> str | None:
        return None if value is None else table_name(value)

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
    def _previous_names(self) -> PipelineSpec:
        names = self.previous_names
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"previous_names: {', '.join(twice)} is given twice; list each earlier name once, "
                             "oldest first")
        if self.name in names:
            raise ValueError(f"previous_names: {self.name} is the pipeline's name now, not an earlier one; "
                             "list only the names it had before")
        return self

    @property
    def identity(self) -> str:
        """The name the pipeline's state is kept under: its first name (``previous_names[0]``), else its name.
        Its default table, checkpoint and quarantine folders, its lock and its tables' transaction id derive
        from it, so that a rename moves nothing."""
        return self.previous_names[0] if self.previous_names else self.name

    @property
    def names(self) -> list[str]:
        """Every name the pipeline has had, the current one last: its runs in the ledger are under these."""
        return [*self.previous_names, self.name]

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
            # the folder knows the upstream pipeline's table: sluice.spec.catalog fills source.path, once
            raise SpecError(self.name, [f"source.pipeline: {self.source.pipeline!r} is not resolved to its table; "
                                        "load the spec with sluice.spec.catalog.resolve_upstream"])
        if isinstance(self.source, DeltaSource) and self.source.table and not self.source.path:
            # a pipeline of the folder, or the catalog (looked up by the run), knows the table's folder
            raise SpecError(self.name, [f"source.table: {self.source.table!r} is not resolved to its folder: no "
                                        "pipeline of the folder has this sink.table; the run looks it up in the "
                                        "catalog"])
        return _resolve(self.source.path, settings.lake_root)

    def sink_path(self, settings: Settings) -> str:
        return _resolve(self.sink.path or self.identity, settings.lake_root)

    def checkpoint_path(self, settings: Settings) -> str:
        return _resolve(self.checkpoint or self.identity, settings.checkpoint_root)

    def archive_path(self, settings: Settings) -> str | None:
        """``source.clean_source.archive_dir`` resolved like ``source.path``; None without one."""
        clean = getattr(self.source, "clean_source", None)
        return _resolve(clean.archive_dir, settings.lake_root) if clean and clean.archive_dir else None

    def quarantine_table_path(self, settings: Settings) -> str:
        return _resolve(self.quarantine_path or f"_quarantine/{self.identity}", settings.lake_root)

    def table_name(self, settings: Settings) -> str | None:
        """The sink table's name in the catalog (``schema.table``): ``sink.table``; else, with
        ``SLUICE_TABLE_NAMES=auto``, a sink folder of two parts under the lake root (``bronze/orders``) is
        ``bronze.orders`` and any other is ``default.<name>``; else None (the table has no name)."""
        if self.sink.table:
            return self.sink.table
        if settings.table_names != "auto":
            return None
        parts = (self.sink.path or "").strip("/").split("/")
        if (self.sink.path and "://" not in self.sink.path and not Path(self.sink.path).is_absolute()
                and len(parts) == 2):
            try:
                return table_name(".".join(parts))
            except ValueError:
                pass
        return f"default.{self.identity}"

    def quarantine_table_name(self, settings: Settings) -> str | None:
        """The quarantine table's name: ``quarantine_table``, else the sink's name with ``_quarantine``."""
        if self.quarantine_table:
            return self.quarantine_table
        name = self.table_name(settings)
        return f"{name}_quarantine" if name else None

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
    return parse_spec(read_yaml(text, source), source)


# libyaml's parser when PyYAML was built with it: a tenth of the pure-Python parser's time (a DAG folder of
# 1,000 specs reads them all on every parse, bench P5); the constructor is the same safe one
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(text: str, source: str) -> Any:
    """One YAML document. A broken one is read again by the pure-Python parser, whose message shows the line
    and a caret under the fault (libyaml's gives the line and column only)."""
    try:
        return yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        pass  # the pure-Python parser is the reference: its answer, document or error, is the one given
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SpecError(source, [f"not valid YAML: {err}"]) from None


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
