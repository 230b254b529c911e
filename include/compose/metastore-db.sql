-- docker-compose.yaml's postgres runs this once, when it creates its data folder: the metastore's own database
-- (the `metastore` service keeps the catalog of table names in it; Airflow keeps its in `airflow`).
CREATE DATABASE metastore OWNER airflow;
