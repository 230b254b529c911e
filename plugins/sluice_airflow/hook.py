"""SluiceSubmitHook: the provider's SparkSubmitHook, which also kills the whole spark-submit process tree."""

from __future__ import annotations

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from sluice.process import kill_tree
from sluice.settings import Settings


class SluiceSubmitHook(SparkSubmitHook):
    """Builds, masks, logs and runs the spark-submit command exactly as the provider's hook does.

    On kill, it stops the whole spark-submit process tree (the JVM and the Python driver under it), not only
    the spark-submit process the provider knows: no orphan writer may keep running beside the retry.
    """

    def on_kill(self) -> None:
        process = self._submit_sp
        if process is not None and process.poll() is None:
            killed = kill_tree(process.pid)
            self.log.info("on_kill: killed the spark-submit process tree %s", killed)
        super().on_kill()

    def host_submit(self, settings: Settings):
        """A ``submit`` handing the job to this host's long-lived driver (``SLUICE_SHARED_DRIVER=host``,
        :mod:`sluice.launch.host`), started against this connection's master with its spark-submit binary; None
        when the connection deploys the driver into the cluster (no driver lives on this host): then the job is
        spark-submitted as usual."""
        from sluice.launch.host import host_submit

        connection = self._connection
        if connection.get("deploy_mode") == "cluster":
            self.log.warning("SLUICE_SHARED_DRIVER=host: the connection %s deploys drivers in the cluster: this job "
                             "is spark-submitted on its own", self._conn_id)
            return None
        return host_submit(settings, connection["master"], spark_binary=connection.get("spark_binary") or "spark-submit")
