"""Batch completions, from Spark's query listener to the coordinator (which checkpoints at batch boundaries)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class BatchCompletions(Protocol):
    """Who hears of completed batches: the coordinator."""

    def batch_completed(self, batch_id: int) -> None: ...


class _ProgressProxy:
    """Spark's ``PythonStreamingQueryListener`` interface, implemented over py4j, reading three fields.

    PySpark's own wrapper turns every progress event into Python field by field (dozens of py4j calls
    per batch, for state operators, sources and metrics); this one asks only for the run id, batch id
    and row count.
    """

    def __init__(self, on_progress: Callable[[str, int, int], None]):
        self.on_progress = on_progress

    def onQueryStarted(self, jevent: Any) -> None:
        """The first progress event carries the batch."""

    def onQueryProgress(self, jevent: Any) -> None:
        progress = jevent.progress()
        self.on_progress(progress.runId().toString(), int(progress.batchId()), int(progress.numInputRows()))

    def onQueryIdle(self, jevent: Any) -> None:
        """Idle triggers run no batch, so there is nothing to checkpoint."""

    def onQueryTerminated(self, jevent: Any) -> None:
        """The job loop sees termination through the query handle."""

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class BatchListener:
    """Forwards completed batches of our query to the coordinator and counts rows."""

    def __init__(self, coordinator: BatchCompletions, spark: Any, rows: dict[int, int] | None = None):
        from pyspark.sql.streaming import StreamingQueryListener

        self.coordinator = coordinator
        self.run_id: str | None = None
        self.rows: dict[int, int] = {} if rows is None else rows
        proxy = _ProgressProxy(self._progress)
        jvm = spark.sparkContext._jvm
        forward = self._progress

        class Listener(StreamingQueryListener):
            """Registered with ``spark.streams`` like any listener; Spark calls the slim proxy.

            ``_jlistener`` is how PySpark hands a listener to the JVM (not public API). Should a PySpark
            release stop using it, Spark calls the methods below through PySpark's own wrapper instead:
            slower, still correct.
            """

            @property
            def _jlistener(self) -> Any:
                # What addListener/removeListener hand to the JVM; built on first use, once addListener has
                # started py4j's callback server.
                if not hasattr(self, "_jlistenerobj"):
                    wrapper = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper
                    self._jlistenerobj = wrapper(proxy)
                return self._jlistenerobj

            def onQueryStarted(self, event: Any) -> None:
                """The first progress event carries the batch."""

            def onQueryProgress(self, event: Any) -> None:
                progress = event.progress
                forward(str(progress.runId), int(progress.batchId), int(progress.numInputRows))

            def onQueryIdle(self, event: Any) -> None:
                """Idle triggers run no batch, so there is nothing to checkpoint."""

            def onQueryTerminated(self, event: Any) -> None:
                """The job loop sees termination through the query handle."""

        self.listener = Listener()

    def _progress(self, run_id: str, batch_id: int, rows: int) -> None:
        if self.run_id is not None and run_id != self.run_id:
            return
        self.rows[batch_id] = rows
        self.coordinator.batch_completed(batch_id)
