"""The ``sluice`` command line: the top floor, over the launcher and the Airflow plugin."""
