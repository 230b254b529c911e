"""SluiceSubmitHook: the provider's SparkSubmitHook, which also kills the whole spark-submit process tree."""

from __future__ import annotations

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from sluice.process import kill_tree


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
