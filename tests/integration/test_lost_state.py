"""Never a silent start from empty state, and no stray folder that poisons ids: real Spark in-process
(issue 28, holes 2 and 6)."""

from __future__ import annotations

import shutil

import pytest

from spark_checkpoint_runtime.layout import NoValidCheckpoint
from tests.support.helpers import Landing, completed_checkpoints, final_counts, run_job

pytestmark = pytest.mark.spark

COUNTS = {"pipeline": "examples.pipelines:running_counts", "output_mode": "update"}


def test_a_job_whose_checkpoints_were_all_deleted_refuses_to_start_from_empty_state(spark, tmp_path, landing):
    landing.add_files(3)
    first = run_job(spark, "counts", tmp_path, landing, **COUNTS)
    assert first["checkpoint_id"] is not None
    job = tmp_path / "root" / "counts"
    for folder in [*job.glob("chk-*"), job / "shared"]:  # a lifecycle rule or a cleanup took every checkpoint
        shutil.rmtree(folder)
    landing.add_files(2)
    with pytest.raises(NoValidCheckpoint, match="has completed checkpoints before") as refused:
        run_job(spark, "counts", tmp_path, landing, **COUNTS)
    assert "--restore-from none" in str(refused.value)
    assert not list(job.glob("chk-*")), "the refused run wrote nothing"
    # Told explicitly, it starts fresh; the old output is set aside, the new counts start from zero.
    again = run_job(spark, "counts", tmp_path, landing, restore_from="none", existing_output="move-aside", **COUNTS)
    assert again["restored_from"] is None and again["checkpoint_id"] > first["checkpoint_id"]


def test_a_stray_folder_far_above_every_id_does_not_poison_the_job(spark, tmp_path, landing: Landing):
    landing.add_files(3)
    first = run_job(spark, "counts", tmp_path, landing, **COUNTS)
    (tmp_path / "root" / "counts" / f"chk-{2**62}").mkdir()  # a bad copy or a typo
    landing.add_files(2)
    second = run_job(spark, "counts", tmp_path, landing, **COUNTS)
    assert second["restored_from"]["id"] == first["checkpoint_id"]
    assert first["checkpoint_id"] < second["checkpoint_id"] < 100
    assert second["checkpoint_id"] in completed_checkpoints(tmp_path / "root", "counts"), "retention kept it"
    assert final_counts(tmp_path / "out") == landing.counts_by_key()
