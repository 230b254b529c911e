"""The Spark side of sluice: read -> transform -> write -> summary. Never imports Airflow."""
