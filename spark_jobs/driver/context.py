"""A run, as the driver's code passes it around: the pipeline, its request, its summary, and where it writes."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from sluice.contract import JobRequest, RunSummary
from sluice.schema.stored import SchemaVersion
from sluice.settings import Settings
from sluice.spec import PipelineSpec


@dataclass(frozen=True)
class Place:
    """A pipeline's table, checkpoint and quarantine table."""

    table: str
    checkpoint: str
    quarantine: str

    @classmethod
    def scratch(cls, folder: str) -> Place:
        """A dry run's copies, in a scratch folder (a path or URI): the real place is not touched."""
        return cls(table=f"{folder}/table", checkpoint=f"{folder}/checkpoint", quarantine=f"{folder}/quarantine")


@dataclass
class Run:
    """One run of one pipeline. ``real``: the pipeline's own table and checkpoint (what the run reads, and
    what the summary names); ``target``: where it writes, the real place or a dry run's scratch copies."""

    spark: SparkSession
    spec: PipelineSpec
    settings: Settings
    job: JobRequest
    summary: RunSummary
    real: Place
    target: Place
    schemas: list[SchemaVersion] = field(default_factory=list)
    """A file source without ``source.schema``: its stored schema versions, oldest first (the last one in use),
    or the version 0 its first run inferred (:mod:`spark_jobs.sources.inference`); empty when the spec declares it."""

    @property
    def dry_run(self) -> bool:
        return self.target != self.real
