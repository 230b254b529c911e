"""The sluice Airflow plugin: the pipelines page (:mod:`sluice_airflow.page`), mounted in the Airflow API
server at ``/sluice`` and listed as "sluice" in the UI's navigation (shown inside the UI)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin


class SluicePlugin(AirflowPlugin):
    name = "sluice"

    @property
    def fastapi_apps(self):  # built when the API server asks, not when a DAG file is parsed
        from sluice_airflow.page import create_app

        return [{"app": create_app(), "url_prefix": "/sluice", "name": "sluice pipelines"}]

    external_views = [{"name": "sluice", "href": "sluice/", "destination": "nav", "url_route": "sluice",
                       "nav_top_level": True}]
