"""File merging with real Spark, in-process: checkpoints that pack their small files into segments
(``--file-merging on``, here on local disk; ``auto`` merges on object stores) restore the state exactly,
for the HDFS-backed store and for RocksDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_state_stores import clean_state_confs, run_family  # noqa: F401 - a fixture
from tests.support.state_matrix import FAMILIES

pytestmark = pytest.mark.spark


@pytest.mark.usefixtures("clean_state_confs")
@pytest.mark.parametrize(("store", "family_name"), [("hdfs", "aggregation"), ("rocksdb", "inner-join")])
def test_merged_checkpoints_restore_exactly(spark, tmp_path: Path, landing, store, family_name):
    family = FAMILIES[family_name]
    merging = ("--file-merging", "on", "--segment-size-mb", "1")
    landing.add_files(4)
    first = run_family(spark, tmp_path, landing, family, store, "merged", *merging)
    landing.add_files(3)
    second = run_family(spark, tmp_path, landing, family, store, "merged", *merging)
    assert second["restored_from"]["id"] == first["checkpoint_id"]
    assert not family.check(tmp_path / "out", landing)

    job = tmp_path / "root" / "merged"
    meta = json.loads((job / f"chk-{second['checkpoint_id']}" / "_metadata").read_text())
    assert meta["format_version"] == 2
    packed = [f for f in meta["files"] if "offset" in f]
    assert len(packed) == len(meta["files"]), "every file of these small jobs is in a segment"
    segments = {f["path"] for f in packed}
    assert all("/_segments/" in path for path in segments)
    # One segment per checkpoint (these are far below 1 MiB); the state's chain references older ones.
    assert all(path.endswith("-0.seg") for path in segments) and len(segments) <= second["checkpoint_id"]
    assert sorted(p.name for p in (job / f"chk-{second['checkpoint_id']}").iterdir()) == ["_metadata"]
