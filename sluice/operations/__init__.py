"""Day 2, without Spark or Airflow: the run ledger, status, backlog, freshness, and the pipelines page's data."""
