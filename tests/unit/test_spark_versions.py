"""The rules of ``runtime/spark_versions.py``: supported versions, features by version, restores across Spark
versions, and the differences Spark's versions have in what they hand the runtime. The version matrix
(``tests/system/test_spark_versions.py``) runs them on each real Spark."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from spark_checkpoint_runtime.spark_versions import (
    UnsupportedSparkFeature,
    check_features,
    check_processing_time_state,
    check_supported,
    missing_api,
    parse_version,
    progress_batch_rows,
    restore_version_difference,
    upgrade_note,
)
from tests.support import version_matrix
from tests.support.spark_installs import INSTALLS, NEWEST, OLDEST


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("3.5.9", (3, 5, 9)), ("4.0", (4, 0, 0)), ("3.5.1-amzn-0", (3, 5, 1)), ("4.1.0.dev1", (4, 1, 0)), ("", None)],
)
def test_versions_parse_with_vendor_suffixes(text, parsed):
    assert parse_version(text) == parsed


def test_a_spark_older_than_3_5_is_refused_naming_the_oldest_supported():
    assert check_supported("3.5.0") == (3, 5, 0)
    with pytest.raises(UnsupportedSparkFeature, match=r"Spark 3\.4\.4 is not supported: .*Spark 3\.5 or newer"):
        check_supported("3.4.4")


def test_features_newer_than_the_running_spark_are_refused_at_start():
    v2 = {"checkpoint_format_version": 2}
    with pytest.raises(UnsupportedSparkFeature, match=r"checkpointFormatVersion=2 needs Spark 4\.0 or newer.*3\.5\.9"):
        check_features((3, 5, 9), v2, [])
    with pytest.raises(UnsupportedSparkFeature, match=r"transformWithState needs Spark 4\.0"):
        check_features((3, 5, 9), {}, [{"type": "transformWithState"}])
    check_features((4, 0, 0), v2, [{"type": "transformWithState"}])  # both exist from 4.0 on
    check_features((3, 5, 9), {"checkpoint_format_version": 1}, [{"type": "aggregation"}])


def test_a_processing_time_transform_with_state_needs_no_data_batches_off_where_spark_fails_them():
    processing = [
        {"type": "aggregation", "key": ["key"]},
        {"type": "transformWithState", "key": ["1", "ProcessingTime"]},
    ]
    with pytest.raises(UnsupportedSparkFeature, match=r"Spark 4\.3\.0 .*noDataMicroBatches\.enabled=false"):
        check_processing_time_state((4, 3, 0), processing, "true")
    check_processing_time_state((4, 3, 0), processing, " False ")  # set as the message asks: it runs
    check_processing_time_state((4, 2, 1), processing, "true")  # 4.0 to 4.2 run it
    check_processing_time_state((4, 4, 0), processing, "true")  # a newer Spark is not presumed broken
    event_time = [{"type": "transformWithState", "key": ["1", "EventTime"]}]
    check_processing_time_state((4, 3, 0), event_time, "true")  # event time's empty batches run fine


def test_a_pipeline_calling_a_newer_api_gets_the_version_it_needs():
    imported = ImportError("cannot import name 'StatefulProcessor' from 'pyspark.sql.streaming' (/x/__init__.py)")
    error = missing_api(imported, (3, 5, 9))
    assert error is not None and "transformWithState (StatefulProcessor) needs Spark 4.0 or newer" in str(error)
    called = AttributeError("'GroupedData' object has no attribute 'transformWithStateInPandas'")
    assert "transformWithState needs Spark 4.0" in str(missing_api(called, (3, 5, 9)))
    assert missing_api(called, (4, 0, 5)) is None, "on a Spark that has it, the user's own error stands"
    rows = AttributeError("'GroupedData' object has no attribute 'transformWithState'")
    assert "the row-based transformWithState needs Spark 4.1 or newer" in str(missing_api(rows, (4, 0, 5)))
    assert missing_api(AttributeError("'X' object has no attribute 'typo'"), (3, 5, 9)) is None


def test_restores_go_from_older_spark_to_newer_never_back():
    assert restore_version_difference("3.5.9", "4.3.0") is None
    assert restore_version_difference("4.3.0", "4.3.1") is None
    assert restore_version_difference("4.3.1", "4.3.0") is None, "patch releases of a minor share their formats"
    assert restore_version_difference(None, "3.5.9") is None, "snapshots from before the version was recorded"
    refusal = restore_version_difference("4.0.5", "3.5.9")
    assert "taken on Spark 4.0.5 and this run uses Spark 3.5.9" in refusal and "Spark 4.0 or newer" in refusal


def test_an_upgrade_says_which_state_format_the_restored_run_writes():
    store = {"provider": "RocksDBStateStoreProvider", "checkpoint_format_version": 1, "changelog_checkpointing": True}
    note = upgrade_note("3.5.9", "4.3.0", store)
    assert "writes state as Spark 4.3 does (RocksDBStateStoreProvider, checkpoint format version 1" in note
    assert "changelog checkpointing on" in note and "Spark 3.5 cannot restore the snapshots this run takes" in note
    assert upgrade_note("4.3.0", "4.3.0", store) is None and upgrade_note(None, "4.3.0", store) is None


def test_progress_entries_are_read_as_spark_3_5_and_4_hand_them():
    assert progress_batch_rows({"batchId": 7, "numInputRows": 30}) == (7, 30)  # Spark 3.5: a dict
    assert progress_batch_rows(SimpleNamespace(batchId=8, numInputRows=12)) == (8, 12)  # 4.0+: an object


def test_the_matrix_spans_the_declared_range_and_its_newest_is_the_suites_own_spark():
    import sys
    import tomllib

    import pyspark

    from spark_checkpoint_runtime.spark_versions import NEWEST_TESTED, OLDEST_SUPPORTED

    assert parse_version(OLDEST.version)[:2] == OLDEST_SUPPORTED and OLDEST.python == "3.10"
    assert parse_version(NEWEST.version)[:2] == NEWEST_TESTED
    assert [i.minor for i in INSTALLS] == ["3.5", "4.0", "4.1", "4.2", "4.3"]
    assert NEWEST.main and pyspark.__version__ == NEWEST.version and sys.prefix == str(NEWEST.home)
    extra = tomllib.loads((version_matrix.REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "pyspark>=3.5,<4.4" in extra["spark"], "pyproject declares the tested range and nothing wider"


def test_the_compatibility_page_is_what_its_json_renders():
    assert version_matrix.main(["--check"]) == 0, f"regenerate with: {version_matrix.RENDER_COMMAND}"
    run = json.loads(version_matrix.PUBLISHED.read_text())
    tested = {r["spark"] for r in run["results"]}
    assert tested == {i.version for i in INSTALLS}, "the published run covers every Spark of the matrix"
