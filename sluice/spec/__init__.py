"""The pipeline spec: YAML in, one frozen, validated model out.

Every entry point (the DAG factory, ``sluice validate``/``run``, the Spark job) loads specs through
:func:`load_spec`, so a spec that passes here is the same spec everywhere. Nothing here imports
PySpark or Airflow: validation happens before any JVM starts, and DAG parsing stays fast.

An invalid spec raises :class:`SpecError`, whose message names the file, the field and what is
allowed, e.g. ``include/pipelines/orders.yaml: source.format: 'xml' is not allowed; use one of:
json, csv, parquet, text``.

The models by part of the spec: :mod:`sluice.spec.sources`, :mod:`~sluice.spec.transform`,
:mod:`~sluice.spec.sinks`, :mod:`~sluice.spec.quality`, :mod:`~sluice.spec.schedule`, the whole
:mod:`~sluice.spec.pipeline`; what they share in :mod:`~sluice.spec.common`. Their names are importable from here.
"""

from sluice.spec.common import (  # noqa: F401
    DURATION,
    DURATION_UNITS,
    NAME_PATTERN,
    RESCUED_COLUMN,
    SCD2_END,
    SCD2_START,
    SCHEDULE_PRESETS,
    CleanMode,
    FileFormat,
    OnBadRecords,
    OnOverwrite,
    OnViolation,
    OptionValue,
    SchemaEvolution,
    SinkMode,
    Trigger,
    duration_seconds,
    stateful_sql,
)
from sluice.spec.errors import SpecError  # noqa: F401
from sluice.spec.pipeline import (  # noqa: F401
    PipelineSpec,
    display_path,
    load_spec,
    parse_spec,
)
from sluice.spec.quality import (  # noqa: F401
    Expectation,
)
from sluice.spec.schedule import (  # noqa: F401
    BACKFILL_PLACEHOLDERS,
    AssetSchedule,
    Backfill,
    Freshness,
)
from sluice.spec.sinks import (  # noqa: F401
    DELTA_SAFE_RETENTION_HOURS,
    Maintenance,
    Sink,
)
from sluice.spec.sources import (  # noqa: F401
    KAFKA_COLUMNS,
    MIB,
    CleanSource,
    DeltaSource,
    FileSource,
    KafkaSchemaInference,
    KafkaSource,
    KafkaValue,
    SchemaInference,
    archive_overlap_message,
    overlapping_folders,
)
from sluice.spec.transform import (  # noqa: F401
    ReferenceTable,
    Transform,
    Watermark,
)
