"""sluice maintenance: one daily DAG, ``sluice_maintenance``, with a task per pipeline that OPTIMIZEs and
VACUUMs its tables as its spec's ``maintenance:`` section says (env SLUICE_MAINTENANCE_SCHEDULE: another
Airflow schedule, or ``none`` for manual runs only)."""

from sluice_airflow.dag_factory import MAINTENANCE_DAG_ID, maintenance_dag

from sluice.settings import load_settings

_settings = load_settings()
globals()[MAINTENANCE_DAG_ID] = maintenance_dag(_settings.pipelines_dir, schedule=_settings.maintenance_schedule)
