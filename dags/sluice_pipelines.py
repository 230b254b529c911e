"""sluice pipelines: one Airflow DAG per YAML spec in the pipelines folder (``include/pipelines/``, or
env SLUICE_PIPELINES). Each DAG has one task, ``ingest``, which runs the pipeline's one-shot streaming
query through spark-submit. Invalid specs are reported by ``sluice_spec_errors.py`` as an import error.
"""

from sluice_airflow.dag_factory import pipeline_dags

globals().update(pipeline_dags())
