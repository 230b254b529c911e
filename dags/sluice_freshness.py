"""sluice freshness: one DAG, ``sluice_freshness``, with a task per pipeline whose spec has a ``freshness:``
section: an alert (a webhook or a mail, through an Airflow connection) when its newest committed data is
older than ``warn_after``, a failed task past ``error_after`` (env SLUICE_FRESHNESS_SCHEDULE: every 15
minutes by default; ``none`` for manual runs only)."""

from sluice_airflow.dag_factory import FRESHNESS_DAG_ID, freshness_dag

from sluice.settings import load_settings

_settings = load_settings()
globals()[FRESHNESS_DAG_ID] = freshness_dag(_settings.pipelines_dir, schedule=_settings.freshness_schedule)
