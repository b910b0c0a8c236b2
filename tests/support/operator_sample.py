"""The in-process operator sample, run under one tested Spark's own Python (the version matrix).

``python -m tests.support.operator_sample FOLDER STORE:FAMILY ...`` starts one local SparkSession of the
Python's pyspark and, for each state store x operator family, runs the runtime twice in this process
(the second run restores the first's last checkpoint after more input landed) and checks the published
output exactly. It prints one JSON line per combination: ``{"store", "family", "outcome", "detail"}`` with
outcome ``passed``, ``failed`` or ``unsupported`` (the runtime refused a feature this Spark lacks; detail
holds its message). The test in ``tests/system/test_spark_versions.py`` reads those lines.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from tests.support.helpers import REPO, SPARK_CONF, job_args
from tests.support.landing import Landing
from tests.support.state_matrix import FAMILIES, STATE_CONFS, store_args


def _session():
    from pyspark.sql import SparkSession

    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName("operator-sample")
    for key, value in {**SPARK_CONF, "spark.sql.streaming.stopTimeout": "30000"}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def run_combination(spark, folder: Path, store: str, family_name: str) -> dict:
    from spark_checkpoint_runtime.options import parse_options
    from spark_checkpoint_runtime.run import StreamingJob
    from spark_checkpoint_runtime.spark_versions import UnsupportedSparkFeature

    family = FAMILIES[family_name]
    landing = Landing(folder / "landing")
    argv = job_args(
        "sample",
        folder / "root",
        folder / "work",
        landing,
        pipeline=f"examples.pipelines:{family.pipeline}",
        output_mode=family.output_mode,
        sink=f"parquet:{folder / 'out'}",
    ) + store_args(store, family)
    result = {"store": store, "family": family_name}
    try:
        landing.add_files(4)
        first = StreamingJob(parse_options(argv), spark).run()
        landing.add_files(3)
        second = StreamingJob(parse_options(argv), spark).run()
    except UnsupportedSparkFeature as exc:
        return {**result, "outcome": "unsupported", "detail": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
        return {**result, "outcome": "failed", "detail": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
    finally:
        for key in STATE_CONFS:  # the next combination starts from the session's defaults
            spark.conf.unset(key)
    problems = family.check(folder / "out", landing)
    if (second.get("restored_from") or {}).get("id") != first["checkpoint_id"]:
        problems.append(f"the second run did not restore the first's checkpoint: {second.get('restored_from')}")
    outcome = "failed" if problems else "passed"
    return {**result, "outcome": outcome, "detail": "; ".join(problems[:5]), "spark_version": spark.version}


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    spark = _session()
    for number, combination in enumerate(argv[1:]):
        store, family = combination.split(":")
        print(json.dumps(run_combination(spark, folder / str(number), store, family)), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
