"""Crash chains per state store layout and operator family: real spark-submit runs SIGKILLed mid-stream.

Each chain kills the job at least twice (at a named point inside a checkpoint's upload or before its
``_metadata``, and at a random moment), restores from latest each time, drains the rest, and checks the
published output exactly against every input row. The default run covers each state file layout (HDFS
deltas, RocksDB zips with SSTs, RocksDB changelogs, RocksDB checkpoint format v2) with a different operator
family; ``-m matrix`` runs every store x family combination.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.support.state_matrix import FAMILIES, store_args
from tests.system.test_chaos import RANDOM, SEED, run_chain

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ARBITRARY = {
    "hdfs": "applyInPandasWithState",
    "rocksdb": "transformWithState",
    "rocksdb-changelog": "transformWithState",
}
DEFAULT = {
    ("hdfs", "session-window"),
    ("rocksdb", "inner-join"),
    ("rocksdb-changelog", "transformWithState"),
    ("rocksdb-v2", "dedup"),
}
CHAINS = [
    pytest.param(store, family, id=f"{store}-{family}", marks=() if (store, family) in DEFAULT else pytest.mark.matrix)
    for store in ("hdfs", "rocksdb", "rocksdb-changelog")
    for family in ("aggregation", "dedup", "inner-join", "session-window", ARBITRARY[store])
] + [pytest.param("rocksdb-v2", "dedup", id="rocksdb-v2-dedup")]


@pytest.mark.parametrize(("store", "family_name"), CHAINS)
def test_killed_twice_and_restored_from_latest_the_output_is_exact(tmp_path: Path, landing, store, family_name):
    family = FAMILIES[family_name]
    rng = random.Random(f"{SEED}-{store}-{family_name}")
    output = run_chain(
        tmp_path,
        landing,
        "chaos-state",
        [f"upload@{rng.randint(2, 3)}", RANDOM],
        rng,
        spark_conf=store_args(store, family),
        pipeline=f"examples.pipelines:{family.pipeline}",
        output_mode=family.output_mode,
        figure_group="state-store chains",
    )
    problems = family.check(output, landing)
    assert not problems, f"{store} x {family_name} (seed {SEED}): {problems[:10]}"
