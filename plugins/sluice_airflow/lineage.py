"""OpenLineage of a pipeline run: what the ``SluicePipelineOperator`` tells Airflow's OpenLineage provider
(``get_openlineage_facets_on_complete`` / ``_on_failure``).

* inputs: the landing folder (files), the Kafka topics, or the upstream pipeline's table (a Delta source),
  with the rows read (``inputStatistics``);
* outputs: the sink table AND the quarantine table, each with its rows written (``outputStatistics``), the
  Delta version the run left it at (``version``) and its schema (``schema``, from its Delta log);
* the job: the SQL transform (``sql``);
* a table that has a name in the catalog (``sink.table``, a Delta source's ``table``): a ``symlinks`` facet with
  that name (namespace ``hive://<metastore host>:<port>``, type ``TABLE``), the naming spec's way to say that a
  path dataset is also a catalog table.

Datasets are named as OpenLineage's naming spec says, so two pipelines of a chain meet on one dataset: a
local path is namespace ``file`` and its absolute path, a bucket ``s3://<bucket>`` and the key, a Kafka topic
``kafka://<first bootstrap server>`` and the topic. Events go where ``AIRFLOW__OPENLINEAGE__TRANSPORT`` says
(a Marquez or any OpenLineage backend, a file, the console); with nothing configured the provider sends
nothing.
"""

from __future__ import annotations

import json
import os
from typing import Any

from sluice.settings import Settings
from sluice.spec import DeltaSource, KafkaSource, PipelineSpec
from sluice.storage.files import local_path
from sluice.storage.object_store import bucket_and_key, is_object_store_uri


def dataset_name(uri: str) -> tuple[str, str]:
    """``(namespace, name)`` of a table or folder."""
    if is_object_store_uri(uri):
        bucket, key = bucket_and_key(uri)
        return f"s3://{bucket}", key.strip("/")
    path = local_path(uri)
    if path is None:  # another file system: its scheme and authority, then the path
        scheme, _, rest = uri.partition("://")
        authority, _, path = rest.partition("/")
        return f"{scheme}://{authority}", "/" + path
    return "file", os.path.abspath(path)


def operator_lineage(spec: PipelineSpec, settings: Settings, summary: Any | None):
    """The ``OperatorLineage`` of one run of ``spec`` (``summary``: its run summary, None when the run left
    none): counts and versions when there is a summary, the datasets always."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        dataset_version_dataset,
        input_statistics_input_dataset,
        output_statistics_output_dataset,
        sql_job,
    )

    data = summary.to_json() if summary is not None else {}
    input_facets = ({"inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
        rowCount=data["input_rows"])} if "input_rows" in data else {})
    upstream = spec.source.table if isinstance(spec.source, DeltaSource) else None
    inputs = [InputDataset(namespace=namespace, name=name, inputFacets=input_facets,
                           facets=_symlinks(settings, upstream) if upstream and not namespace.startswith("hive:") else {})
              for namespace, name in _inputs(spec, settings)]
    outputs = []
    for uri, rows_key, table in ((spec.sink_path(settings), "output_rows", spec.table_name(settings)),
                                 (spec.quarantine_table_path(settings), "quarantined_rows",
                                  spec.quarantine_table_name(settings))):
        namespace, name = dataset_name(uri)
        facets: dict[str, Any] = _symlinks(settings, table) if table else {}
        state = _state(uri)
        if state is not None:
            facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(state["version"]))
            schema = _schema(state.get("schema"))
            if schema is not None:
                facets["schema"] = schema
        output_facets = ({"outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=data[rows_key])} if rows_key in data else {})
        outputs.append(OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=output_facets))
    job_facets = {}
    if spec.transform is not None and spec.transform.sql:
        job_facets["sql"] = sql_job.SQLJobFacet(query=spec.transform.sql, dialect="spark")
    return OperatorLineage(inputs=inputs, outputs=outputs, job_facets=job_facets)


def _inputs(spec: PipelineSpec, settings: Settings) -> list[tuple[str, str]]:
    source = spec.source
    if isinstance(source, KafkaSource):
        server = (source.bootstrap_servers or f"connection-{source.connection}").split(",")[0].strip()
        return [(f"kafka://{server}", topic) for topic in source.topics or [source.subscribe_pattern or ""]]
    if isinstance(source, DeltaSource):
        from sluice.spec.catalog import resolve_upstream

        resolved = resolve_upstream(spec, settings)
        if resolved.source.table and not resolved.source.path:  # no pipeline here writes it: its name only
            return [(catalog_namespace(settings), resolved.source.table)]
        return [dataset_name(resolved.source_path(settings))]
    return [dataset_name(spec.source_path(settings))]


def catalog_namespace(settings: Settings) -> str:
    """The naming spec's namespace of a Hive metastore's tables: ``hive://<host>:<port>`` (the first URI)."""
    return "hive://" + settings.metastore_uri.split(",")[0].removeprefix("thrift://")


def _symlinks(settings: Settings, table: str) -> dict[str, Any]:
    from openlineage.client.facet_v2 import symlinks_dataset

    return {"symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[
        symlinks_dataset.Identifier(namespace=catalog_namespace(settings), name=table, type="TABLE")])}


def _state(uri: str) -> dict[str, Any] | None:
    from sluice.storage.delta_log import log_state

    try:
        return log_state(uri)
    except Exception:  # noqa: BLE001 - lineage never fails a task: the table's state is a detail
        return None


def _schema(schema: Any):
    """Delta's schema (Spark's JSON) as OpenLineage's schema facet: each column's name and type."""
    from openlineage.client.facet_v2 import schema_dataset

    if isinstance(schema, str):
        schema = json.loads(schema)
    if not isinstance(schema, dict) or not schema.get("fields"):
        return None
    return schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(
            name=field["name"], type=field["type"] if isinstance(field["type"], str) else field["type"].get("type"))
        for field in schema["fields"]])
