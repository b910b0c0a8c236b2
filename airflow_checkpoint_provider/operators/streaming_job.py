"""Operators that run a checkpointed streaming job: submit it, or restore it from a chosen checkpoint."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.providers.common.compat.openlineage.utils.spark import (
    inject_parent_job_information_into_spark_properties,
    inject_transport_information_into_spark_properties,
)
from airflow.providers.common.compat.sdk import conf as airflow_conf
from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_checkpoint_provider.durations import Duration, for_runtime, to_seconds
from airflow_checkpoint_provider.failures import definitive_arguments
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.hooks.kill_watch import KILL_POLL_SECONDS, KillWatch, stop_request_id
from airflow_checkpoint_provider.hooks.standalone_driver import DRIVER_KILL_GRACE_SECONDS
from airflow_checkpoint_provider.hooks.streaming_job import StreamingJobHook
from airflow_checkpoint_provider.links import CheckpointHistoryLink, SparkUILink
from airflow_checkpoint_provider.operators.deferred_driver import DeferredDriverMixin
from airflow_checkpoint_provider.operators.outlets import emit_output_events, output_outlet
from airflow_checkpoint_provider.redaction import public_url
from airflow_checkpoint_provider.sensors.checkpoint import push_checkpoint_keys
from airflow_checkpoint_provider.ui.roots import job_page_url
from spark_checkpoint_runtime.errors import EXIT_BAD_INPUT, EXIT_CANNOT_RESTORE
from spark_checkpoint_runtime.layout import CheckpointFormatError, ControlChannel, key_from
from spark_checkpoint_runtime.options import RUNTIME_DURATIONS, JobOptions, options_from_mapping

# Runtime options the operator passes through when set (snake_case names, as the runtime accepts them).
_PASSED_OPTIONS = (
    "job_name",
    "checkpoint_root",
    "pipeline",
    "sink",
    "output_mode",
    "trigger",
    "batch_interval",
    "max_duration",
    "checkpoint_interval",
    "checkpointing_mode",
    "num_retained",
    "working_dir",
)

# Never from runtime_options: they would land on spark-submit's command line, which is logged.
_NOT_RUNTIME_OPTIONS = {"storage_options", "spec"}


# The runtime's exit codes for bad input and a restore it refused: a retry would fail the same way.
DEFINITIVE_EXIT_CODES = (EXIT_BAD_INPUT, EXIT_CANNOT_RESTORE)


def run_key_of(context: Context) -> str:
    """A key naming this task try, safe as a file name: the runtime reports under it and obeys stops for it."""
    ti = context["ti"]
    return key_from(f"{ti.dag_id}.{ti.task_id}.{ti.run_id}.{getattr(ti, 'map_index', -1)}.try{ti.try_number}")


#: How long ``on_kill`` may take: Airflow 3's supervisor sends SIGKILL about 5 s after SIGTERM.
ON_KILL_SECONDS = 3.0


class CheckpointedStreamingJobOperator(DeferredDriverMixin, BaseOperator):
    """Run a Spark Structured Streaming job with Flink-style checkpoints (the runtime, via spark-submit).

    Keyword arguments mirror the runtime's options in snake_case (see docs/runtime.md for each one's meaning
    and default). Every retry restores from the latest checkpoint. Returns the run's report to XCom
    (``checkpoint_id``, ``checkpoint_path``, ``restored_from``, ``batches``, ``rows``, ``status`` and more; its
    size does not grow with the run's length) and pushes ``checkpoint_id`` and ``checkpoint_path`` as keys of
    their own: ``CheckpointSensor(newer_than=run.output["checkpoint_id"])``.

    :param job_name: stable job folder name under the checkpoint root (templated).
    :param checkpoint_root: a path, ``file://`` URL or any fsspec URL (templated);
        default: the Host of the ``storage_conn_id`` connection.
    :param pipeline: ``module:function`` returning an unstarted streaming DataFrame (templated).
    :param sink: ``parquet:PATH``, ``console`` or ``module:Class`` (templated).
    :param output_mode: ``append``, ``update`` or ``complete``.
    :param trigger: ``available-now`` (default) or ``continuous``.
    :param batch_interval: continuous: time between batches, e.g. ``"500ms"``. Every duration argument (and
        every duration in ``runtime_options``) takes seconds (``300``), a ``timedelta`` or a string with a unit.
    :param max_duration: continuous: stop gracefully after this long, e.g. ``"10min"``.
    :param checkpoint_interval: e.g. ``"10s"`` (runtime default).
    :param checkpointing_mode: ``exactly-once`` (default) or ``at-least-once``.
    :param num_retained: completed checkpoints to keep (runtime default 3).
    :param working_dir: where Spark keeps its own checkpoint folder between our checkpoints (templated). On a
        cluster it must be one folder the driver and every executor share (NFS, a volume every worker mounts);
        default: a private temporary folder on the driver's host, which only local mode can use.
    :param restore_from: ``latest`` (default), ``none``, a ``chk-N`` path of this job or a savepoint folder (templated).
    :param conn_id: Spark connection (default ``spark_default``; templated); it must exist. Its
        ``spark-binary`` extra picks the spark-submit on the worker's PATH, and so the Spark version the job
        runs on: to move a job to another Spark, restart it from a savepoint with that Spark's connection.
    :param conf: Spark confs for spark-submit (templated).
    :param py_files: files or package folders to ship with the job, e.g. the pipeline's package (templated).
    :param env_vars: environment for spark-submit (templated).
    :param storage_conn_id: ``checkpoint_storage`` connection with fsspec storage options, if needed.
    :param runtime_options: any other runtime option, e.g. ``{"min_pause": "5s", "tolerable_failed_checkpoints": 2}``.
    :param emit_assets: declare the Parquet sink's output folder as an outlet (an ``Asset``, or an
        ``AssetAlias`` when the path is templated) and, when the run committed output, emit an Asset event whose
        extra carries ``job_name``, ``checkpoint_id``, ``batch_id``, ``rows`` and ``run_id``. A DAG with
        ``schedule=[Asset("file:///.../out")]`` then runs after each committing run. Default True; ignored when
        ``outlets`` is given.
    :param openlineage_inject_parent_job_info: pass this task as the OpenLineage parent job to the Spark
        job's OpenLineage listener (``spark.openlineage.parent*`` confs), as SparkSubmitOperator does; needs the
        OpenLineage provider. Default: ``[openlineage] spark_inject_parent_job_info``.
    :param openlineage_inject_transport_info: pass Airflow's OpenLineage transport to the Spark job
        (``spark.openlineage.transport.*``). Default: ``[openlineage] spark_inject_transport_info``.
    :param stop_timeout: seconds a graceful stop may take once asked (``on_kill``, SIGTERM); the runtime ends
        the run past it (``--stop-timeout``), publishing nothing beyond its last checkpoint.
    :param kill_poll_interval: how often this task looks for a kill request for its run (one small read each
        time; default 60 s): ``StopStreamingJobOperator`` asks for one when the driver does not answer a stop,
        and this task then kills spark-submit with every process under it (a driver on the cluster: through
        its master) and fails.
    :param deferrable: with the driver on a standalone cluster (the Spark connection's ``deploy-mode`` extra
        ``cluster``, a ``spark://`` master), submit it and free this worker slot while it runs: the triggerer
        follows the driver (``ClusterDriverTrigger``) and the task resumes when it ends, with the same result,
        failure and retry as the blocking operator. A kill request is then served by the triggerer, which also
        kills a running driver whose heartbeat has not changed for the job's lease timeout (hung, frozen, cut
        off from its storage): the task fails, and its retry restores.
    :param driver_poll_interval: deferrable: time between two looks at the driver's state (default 10 s).
    """

    template_fields: Sequence[str] = (
        *_PASSED_OPTIONS,
        "restore_from",
        "conn_id",
        "conf",
        "py_files",
        "env_vars",
        "runtime_options",
        "stop_timeout",
        "kill_poll_interval",
        "driver_poll_interval",
    )
    template_fields_renderers = {"conf": "json", "env_vars": "json", "runtime_options": "json", "py_files": "json"}
    operator_extra_links = (CheckpointHistoryLink(), SparkUILink())
    ui_color = "#e4f0e8"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str | None = None,
        pipeline: str,
        sink: str = "console",
        output_mode: str = "append",
        trigger: str = "available-now",
        batch_interval: Duration | None = None,
        max_duration: Duration | None = None,
        checkpoint_interval: Duration | None = None,
        checkpointing_mode: str | None = None,
        num_retained: int | str | None = None,
        working_dir: str | None = None,
        restore_from: str = "latest",
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        py_files: list[str] | None = None,
        env_vars: dict[str, str] | None = None,
        storage_conn_id: str | None = None,
        runtime_options: dict[str, Any] | None = None,
        stop_timeout: Duration = 120.0,
        kill_poll_interval: Duration = KILL_POLL_SECONDS,
        deferrable: bool = False,
        driver_poll_interval: Duration = 10.0,
        emit_assets: bool = True,
        openlineage_inject_parent_job_info: bool = airflow_conf.getboolean(
            "openlineage", "spark_inject_parent_job_info", fallback=False
        ),
        openlineage_inject_transport_info: bool = airflow_conf.getboolean(
            "openlineage", "spark_inject_transport_info", fallback=False
        ),
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        # After BaseOperator's init: the DAG (given, or the one in context) is known, and names the alias.
        outlet = output_outlet(sink, job_name, self.task_id, self.dag_id) if emit_assets else None
        if outlet is not None and not self.outlets:
            self.add_outlets([outlet])
        self.emit_assets = emit_assets
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.openlineage_inject_transport_info = openlineage_inject_transport_info
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.pipeline = pipeline
        self.sink = sink
        self.output_mode = output_mode
        self.trigger = trigger
        self.batch_interval = batch_interval
        self.max_duration = max_duration
        self.checkpoint_interval = checkpoint_interval
        self.checkpointing_mode = checkpointing_mode
        self.num_retained = num_retained
        self.working_dir = working_dir
        self.restore_from = restore_from
        self.conn_id = conn_id
        self.conf = conf or {}
        self.py_files = py_files or []
        self.env_vars = env_vars or {}
        self.storage_conn_id = storage_conn_id
        self.runtime_options = runtime_options or {}
        self.stop_timeout = stop_timeout
        self.kill_poll_interval = kill_poll_interval
        self.deferrable = deferrable
        self.driver_poll_interval = driver_poll_interval
        self._job_hook: StreamingJobHook | None = None
        self._run_key: str | None = None
        self._options: JobOptions | None = None  # this try's runtime options, as the runtime reads them

    @property
    def storage_hook(self) -> CheckpointStorageHook:
        return CheckpointStorageHook(self.storage_conn_id)

    def runtime_values(self, restore_from: str, run_key: str) -> dict[str, Any]:
        """The runtime options for this try, validated by the runtime's own rules."""
        values = {name: getattr(self, name) for name in _PASSED_OPTIONS if getattr(self, name) not in (None, "")}
        smuggled = sorted(set(self.runtime_options) & _NOT_RUNTIME_OPTIONS)
        if smuggled:
            raise AirflowFailException(
                f"{self.task_id}: runtime_options may not set {', '.join(smuggled)}: storage options and credentials "
                "come from the storage connection (storage_conn_id) and travel in a private spec file, never on "
                "spark-submit's command line"
            )
        twice = sorted(k for k in values if self.runtime_options.get(k) not in (None, ""))
        if twice:
            raise AirflowFailException(
                f"{self.task_id}: {', '.join(twice)} given both as an argument and in runtime_options; give it once"
            )
        values.update({k: v for k, v in self.runtime_options.items() if v not in (None, "")})
        values.update(restore_from=restore_from, run_key=run_key, stop_timeout=self.stop_timeout)
        with definitive_arguments(self.task_id):  # OptionsError and CheckpointFormatError are ValueErrors
            # Airflow's convention (seconds, timedelta, or a unit) to the runtime's, with the unit spelled out.
            values.update({k: for_runtime(v, name=k) for k, v in values.items() if k in RUNTIME_DURATIONS})
            self._options = options_from_mapping(values)
        return values

    def spark_conf(self, context: Context) -> dict[str, Any]:
        """The Spark confs for this try: ``conf`` plus the OpenLineage parent job and transport, if asked."""
        spark_conf = dict(self.conf)
        if self.openlineage_inject_parent_job_info:
            spark_conf = inject_parent_job_information_into_spark_properties(spark_conf, context)
        if self.openlineage_inject_transport_info:
            spark_conf = inject_transport_information_into_spark_properties(spark_conf, context)
        return spark_conf

    def choose_restore(self, context: Context) -> str:
        """``restore_from`` for this try: a retry restores from the latest checkpoint this DAG run made."""
        if self.restore_from == "latest" or context["ti"].try_number <= 1:
            return self.restore_from
        latest = self.storage_hook.latest_checkpoint(self.checkpoint_root, self.job_name)
        started = context["dag_run"].start_date
        if latest and (started is None or latest["completion_timestamp_ms"] / 1000 >= _timestamp(started)):
            self.log.info(
                "retry %d: restoring from the latest checkpoint %s", context["ti"].try_number, latest["checkpoint_path"]
            )
            return "latest"
        return self.restore_from

    def execute(self, context: Context) -> dict[str, Any]:
        self.checkpoint_root = CheckpointStorageHook(self.storage_conn_id).root(self.checkpoint_root)
        restore_from = self.choose_restore(context)
        self._run_key = run_key_of(context)
        values = self.runtime_values(restore_from, self._run_key)
        args = [item for key, value in values.items() for item in (f"--{key.replace('_', '-')}", str(value))]
        self._job_hook = StreamingJobHook(
            conn_id=self.conn_id,
            conf=self.spark_conf(context),
            py_files=self.py_files,
            env_vars=self.env_vars,
            name=f"checkpointed:{self.job_name}",
            shared_folder=values.get("working_dir"),
        )
        control = self.storage_hook.control(self.checkpoint_root, self.job_name)
        page = job_page_url(self.checkpoint_root, self.job_name)
        CheckpointHistoryLink().persist(context, page or public_url(control.storage.url_of(control.storage.job_path)))
        spark_ui = self._job_hook.pin_spark_ui()
        if spark_ui:
            SparkUILink().persist(context, spark_ui)
        hook = self._job_hook
        watch = KillWatch(
            control, self._run_key, hook.kill_submission, to_seconds(self.kill_poll_interval, name="kill_poll_interval")
        )
        if self.deferrable:
            self._defer_to_the_driver(hook, args, heartbeat_timeout=self._options.lease_timeout)
        failure: AirflowException | None = None
        with tempfile.TemporaryDirectory(prefix="checkpointed-job-") as workdir, watch:
            try:
                hook.submit(args, self.storage_hook.storage_options(), Path(workdir))
            except AirflowException as exc:
                failure = exc
        if watch.reason is not None:  # whatever spark-submit's exit code (0 too, if killed between two reads)
            raise AirflowException(f"job {self.job_name!r} was killed: {watch.reason}") from failure
        returncode = hook.process.returncode if hook.process is not None and hook.driver is None else None
        return self._outcome(context, control, failure, returncode)

    def _outcome(
        self, context: Context, control: ControlChannel, failure: AirflowException | None, returncode: int | None
    ) -> dict[str, Any]:
        """The run's result from its report, or the failure to raise: definitive (no retry) for an exit code
        that says the same try would fail the same way (spark-submit's, or for a driver on the cluster the one
        the runtime wrote in its report)."""
        report = control.run_report(self._run_key)
        if failure is not None:
            if returncode is None and report is not None and isinstance(report.get("exit_code"), int):
                returncode = report["exit_code"]
            code = f" (exit {returncode})" if returncode is not None else ""
            # Bad input or a restore the runtime refused (incompatible, damaged, missing): the same try again
            # fails the same way, so no retry is spent on it. A failed or held job may do better on a retry.
            error = AirflowFailException if returncode in DEFINITIVE_EXIT_CODES else AirflowException
            if report and report.get("error"):
                raise error(f"job {self.job_name!r} failed{code}: {report['error']}") from failure
            if report is None:
                self._report_silent_end(control, code)
            if error is AirflowFailException:
                raise AirflowFailException(str(failure)) from failure
            raise failure
        if report is None:
            raise AirflowException(
                f"job {self.job_name!r}: spark-submit exited 0 but the runtime wrote no run report under "
                f"{self.checkpoint_root}/{self.job_name}/_control/runs/{self._run_key}.json"
            )
        push_checkpoint_keys(context, report)
        self._emit_asset_events(context, report)
        return {**report, "run_key": self._run_key}

    def _report_silent_end(self, control: ControlChannel, code: str) -> None:
        """The driver died without a report (SIGKILL, OOM): say so under its run key, so that watchers and
        stoppers see the run ended instead of waiting for it."""
        try:
            control.write_run_report(
                self._run_key,
                {"status": "failed", "error": f"spark-submit exited{code} without a run report (killed or crashed)"},
            )
        except Exception:
            self.log.warning("could not write the run report of run key %s", self._run_key, exc_info=True)

    def _emit_asset_events(self, context: Context, report: dict[str, Any]) -> None:
        if self.emit_assets:
            emit_output_events(context, self.outlets, self.sink, self.job_name, report)

    def on_kill(self) -> None:
        """Start a graceful stop and return within ``ON_KILL_SECONDS``: Airflow 3 sends SIGKILL about 5 s after
        SIGTERM.

        Sends SIGTERM to spark-submit first (the runtime's JVM hook turns it into a graceful stop of a driver
        on this machine at once, whatever the storage does), then writes the stop request to ``_control/``
        (it reaches the driver on any master, in cluster deploy mode too) for at most the rest of
        ``ON_KILL_SECONDS``: a store that does not answer then cannot hold the task past its SIGKILL. The job
        finishes its batch, takes a final checkpoint and commits; the runtime's own ``--stop-timeout`` bounds
        that, so spark-submit never outlives the stop timeout even when this task process is gone.

        A driver on a standalone cluster (cluster deploy mode) gets the stop request too, and a process of its
        own asks the master to kill it if it still runs ``DRIVER_KILL_GRACE_SECONDS`` past the stop timeout.
        """
        hook = self._job_hook
        started = time.monotonic()
        driver = hook.cluster_driver() if hook is not None else None
        if driver is not None:
            # The driver runs on the cluster: a process of its own kills it through the master if the graceful
            # stop asked below has not ended it within the stop timeout (this task is SIGKILLed long before),
            # and removes the launcher.
            grace = to_seconds(self.stop_timeout, name="stop_timeout") + DRIVER_KILL_GRACE_SECONDS
            driver.kill_later(grace, hook.cluster_files)
        elif hook is None or hook.process is None or hook.process.poll() is not None:
            return
        else:
            hook.process.terminate()
        writer = threading.Thread(target=self._request_stop, name="stop-request", daemon=True)
        writer.start()
        writer.join(max(0.0, ON_KILL_SECONDS - (time.monotonic() - started)))
        if writer.is_alive():
            self.log.warning(
                "the stop request for job %r is not written after %.0f s (storage slow or unreachable); "
                "SIGTERM went to spark-submit, which stops the job",
                self.job_name,
                ON_KILL_SECONDS,
            )
        self.log.info("asked job %r to stop gracefully (within %ss)", self.job_name, self.stop_timeout)

    def _request_stop(self) -> None:
        try:
            control = self.storage_hook.control(self.checkpoint_root, self.job_name)
            control.request(stop_request_id(self._run_key), "stop", self._run_key)
        except Exception:
            self.log.exception("could not write the stop request; SIGTERM alone stops the job")


class RestoreFromCheckpointOperator(CheckpointedStreamingJobOperator):
    """Run the job from its latest valid checkpoint (or ``restore_from``: a ``chk-N`` path or a savepoint).

    ``latest`` is passed to the runtime as it is and resolved there, once the run holds the job: a checkpoint
    completed in between is not skipped. A restore from an older checkpoint or a savepoint starts a new
    history (see "Lineage" in docs/concepts.md); the runtime makes that durable before it sets any output aside.

    Fails with a clear message when the job has no checkpoint at all, unless ``allow_fresh_start=True``. When
    checkpoints exist but none is valid, the run always fails (the runtime exits 3 naming each damaged one):
    starting from empty state then would publish every row again.

    :param allow_fresh_start: start from empty state when the job has no checkpoint at all. A sink that
        already holds published output still needs ``runtime_options={"existing_output": ...}``.
    """

    def __init__(self, *, allow_fresh_start: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.allow_fresh_start = allow_fresh_start

    def execute(self, context: Context) -> dict[str, Any]:
        self.checkpoint_root = self.storage_hook.root(self.checkpoint_root)
        storage = self.storage_hook.storage(self.checkpoint_root, self.job_name)
        if self.restore_from in ("latest", "", None):
            self.restore_from = "latest"
            if storage.checkpoints.newest_metadata_id() is None and not self.allow_fresh_start:
                raise AirflowFailException(
                    f"{storage.location} has no checkpoint to restore from; set allow_fresh_start=True "
                    "to start from empty state"
                )
        elif self.restore_from != "none":
            try:
                storage.resolve_snapshot(self.restore_from)
            except CheckpointFormatError as exc:
                raise AirflowFailException(str(exc)) from None
        return super().execute(context)


def _timestamp(value: datetime | Any) -> float:
    return value.timestamp() if hasattr(value, "timestamp") else float(value)
