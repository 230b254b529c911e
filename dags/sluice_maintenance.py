"""sluice maintenance: one daily DAG, ``sluice_maintenance``, with a task per pipeline that OPTIMIZEs and
VACUUMs its tables as its spec's ``maintenance:`` section says (env SLUICE_MAINTENANCE_SCHEDULE: another
Airflow schedule, or ``none`` for manual runs only)."""

import os

from sluice_airflow.dag_factory import MAINTENANCE_DAG_ID, maintenance_dag

_schedule = os.environ.get("SLUICE_MAINTENANCE_SCHEDULE", "@daily")
globals()[MAINTENANCE_DAG_ID] = maintenance_dag(schedule=None if _schedule.lower() in ("", "none") else _schedule)
