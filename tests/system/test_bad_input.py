"""Must-show 6: bad input exits non-zero with a one-line reason and leaves the checkpoint root unchanged.

Here a Spark setting changed against a real checkpoint; options and restore points the CLI refuses before
Spark starts are ``tests/unit/test_bad_input.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_checkpoint_runtime.options import parse_options
from spark_checkpoint_runtime.run import StreamingJob
from tests.support.helpers import SPARK_CONF, Landing, job_args, run_module, tree_state
from tests.unit.test_bad_input import _assert_refused


@pytest.mark.spark
@pytest.mark.slow
def test_changed_shuffle_partitions_is_refused_by_the_cli(spark, tmp_path: Path, landing: Landing):
    root, work = tmp_path / "root", tmp_path / "work"
    landing.add_files(2)
    options = job_args(
        "j",
        root,
        work,
        landing,
        pipeline="examples.pipelines:running_counts",
        output_mode="update",
        sink=f"parquet:{tmp_path / 'out'}",
    )
    StreamingJob(parse_options(options), spark).run()
    before = tree_state(root), tree_state(tmp_path / "out")
    conf = [a for k, v in {**SPARK_CONF, "spark.sql.shuffle.partitions": "5"}.items() for a in ("--conf", f"{k}={v}")]
    result = run_module(options + conf, timeout=240)
    _assert_refused(result, "incompatible restore", code=3)
    assert "conf spark.sql.shuffle.partitions: 2 became 5" in result.stderr
    assert (tree_state(root), tree_state(tmp_path / "out")) == before
