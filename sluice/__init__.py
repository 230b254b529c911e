"""sluice's ground floor and launcher: no Spark, no Airflow.

    sluice.settings, sluice.spark_conf, sluice.process   where things are; Spark's settings; process trees
    sluice.spec        the pipeline spec: models, loading, errors, the pipelines folder, the generated reference
    sluice.contract    the job request and run summary passed between launcher and driver; run requests
    sluice.storage     URI file system, object store, checkpoints, Delta logs read without Spark, locks
    sluice.schema      inferred schemas stored in a checkpoint, and what a run would change in a table's schema
    sluice.operations  day 2: the run ledger, status, backlog, freshness, the pipelines page's data
    sluice.launch      the spark-submit: build it, launch it, read the summary back (one floor up)"""
