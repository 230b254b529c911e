"""The Airflow side of sluice: the DAG factory, the operator, and the Spark connection check.

Lives in ``plugins/`` (Airflow puts that folder on ``sys.path``); the package is also installed into
the project's virtualenv so that ``sluice run`` uses the same code.
"""
