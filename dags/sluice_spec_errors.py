"""Surfaces invalid sluice pipeline specs in the Airflow UI as an import error of this DAG file.

A DAG file that raises hides every DAG it defines, so the valid specs are built by
``sluice_pipelines.py`` and only the errors live here: one bad spec never hides the others.
"""

from sluice_airflow.dag_factory import raise_spec_errors

raise_spec_errors()
