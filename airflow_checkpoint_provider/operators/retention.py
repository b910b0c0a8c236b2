"""Retention for a job's checkpoint folder, safe while the job runs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_checkpoint_provider.durations import Duration, optional_seconds, to_seconds
from airflow_checkpoint_provider.failures import definitive_arguments
from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from spark_checkpoint_runtime.layout import key_from
from spark_checkpoint_runtime.retention import apply_job_retention, plan_job_retention


class CheckpointRetentionOperator(BaseOperator):
    """Delete what a job's retention policy does not keep, and report it.

    Keeps the ``num_retained`` newest completed checkpoints and every shared file they reference. Savepoints
    go by ``savepoint_max_count`` / ``savepoint_max_age`` but the newest is always kept. Orphans (``chk-*``
    and ``savepoints/*`` folders without ``_metadata``, which a killed checkpoint, savepoint or rescale leaves,
    and shared files nothing retained references) go only when older than ``orphan_grace_period``, so a
    checkpoint or savepoint being written right now is never touched.

    Returns counts only (the XCom value stays small whatever the number of files): ``{"dry_run", "kept":
    {"checkpoints": 3, ...}, "deleted": {"checkpoints": 2, "shared_files": 40, ...}, "bytes_freed",
    "report_path"}``; the full report (every kept and deleted path) is stored at ``report_path``
    (``<job>/_reports/retention-<run>.json``).

    :param job_name: the job folder (templated).
    :param checkpoint_root: the checkpoint root (templated);
        default: the Host of the ``storage_conn_id`` connection.
    :param num_retained: completed checkpoints to keep (default 3).
    :param savepoint_max_count: savepoints to keep at most (None: no limit).
    :param savepoint_max_age: delete savepoints older than this, e.g. ``30d`` (None: no limit).
    :param orphan_grace_period: minimum age of an orphan before it is deleted (default ``1h``).
    :param dry_run: plan and report only.
    :param storage_conn_id: ``checkpoint_storage`` connection, if the storage needs credentials.
    """

    template_fields: Sequence[str] = (
        "job_name",
        "checkpoint_root",
        "num_retained",
        "dry_run",
        "savepoint_max_age",
        "orphan_grace_period",
    )
    ui_color = "#f0e4e4"

    def __init__(
        self,
        *,
        job_name: str,
        checkpoint_root: str | None = None,
        num_retained: int = 3,
        savepoint_max_count: int | None = None,
        savepoint_max_age: Duration | None = None,
        orphan_grace_period: Duration = "1h",
        dry_run: bool = False,
        storage_conn_id: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.job_name = job_name
        self.checkpoint_root = checkpoint_root
        self.num_retained = num_retained
        self.savepoint_max_count = savepoint_max_count
        self.savepoint_max_age = savepoint_max_age
        self.orphan_grace_period = orphan_grace_period
        self.dry_run = dry_run
        self.storage_conn_id = storage_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        self.checkpoint_root = CheckpointStorageHook(self.storage_conn_id).root(self.checkpoint_root)
        storage = CheckpointStorageHook(self.storage_conn_id).storage(self.checkpoint_root, self.job_name)
        dry_run = self.dry_run if isinstance(self.dry_run, bool) else str(self.dry_run).lower() == "true"
        with definitive_arguments(f"retention of job {self.job_name!r}"):
            num_retained = int(self.num_retained)
            savepoint_max_age = optional_seconds(self.savepoint_max_age, name="savepoint_max_age")
            orphan_grace = to_seconds(self.orphan_grace_period, name="orphan_grace_period")
        plan = plan_job_retention(
            storage,
            num_retained=num_retained,
            savepoint_max_count=self.savepoint_max_count,
            savepoint_max_age=savepoint_max_age,
            orphan_grace=orphan_grace,
            now=time.time(),
        )
        if not dry_run:
            apply_job_retention(storage, plan)
        ti = context["ti"]
        key = key_from(f"{ti.dag_id}.{ti.task_id}.{ti.run_id}.try{ti.try_number}")
        summary = plan.summary(dry_run=dry_run)
        summary["report_path"] = storage.write_report("retention", key, plan.as_report(dry_run=dry_run))
        self.log.info("retention for %s%s: %s", storage.location, " (dry run)" if dry_run else "", summary)
        return summary
