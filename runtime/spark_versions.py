"""The Spark versions the runtime runs on (3.5.x to 4.3.x), and each difference between them in one place.

The runtime is submitted to the user's Spark, not ours. Every behaviour that differs between supported
versions has one function or constant here, named after the Spark behaviour, with the version that
introduced it. The rest of the runtime asks this module instead of testing version numbers itself.

A feature the running Spark lacks fails at start with ``UnsupportedSparkFeature``, naming the version it
needs; nothing degrades silently.
"""

from __future__ import annotations

import re
from typing import Any

# The oldest and the newest minor version the test matrix runs (scripts/test.sh -m versions).
OLDEST_SUPPORTED = (3, 5)
NEWEST_TESTED = (4, 3)


class UnsupportedSparkFeature(ValueError):
    """The job asks for something the running Spark does not have (or the Spark itself is not supported)."""


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """``"3.5.9"`` -> ``(3, 5, 9)``; vendor suffixes (``"3.5.1-amzn-0"``, ``"4.0.0.dev1"``) are ignored."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    if not match:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def check_supported(version: str) -> tuple[int, int, int]:
    """The running Spark's version, refused when older than the oldest supported one."""
    parsed = parse_version(version)
    if parsed is None:
        raise UnsupportedSparkFeature(f"cannot read the running Spark's version {version!r}")
    if parsed[:2] < OLDEST_SUPPORTED:
        raise UnsupportedSparkFeature(
            f"Spark {version} is not supported: the runtime needs Spark {_dotted(OLDEST_SUPPORTED)} or newer"
        )
    return parsed


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


# -- Features that exist only from some version on ---------------------------------------------------------

# Each: what the user asked for -> the first Spark that has it.
# State store checkpoint format version 2 (state files named by unique id): Spark 4.0.
CHECKPOINT_FORMAT_V2 = (4, 0)
# transformWithState / transformWithStateInPandas: Spark 4.0; PySpark's row-based transformWithState: 4.1.
TRANSFORM_WITH_STATE = (4, 0)
ROW_TRANSFORM_WITH_STATE = (4, 1)
# The offline state repartition (a checkpoint folder rewritten for a new partition count), which rescale uses.
OFFLINE_REPARTITION = (4, 3)
# Streaming deduplication looks its keys up with -0.0 as 0.0 (SPARK-56280): Spark 4.2. Aggregations, joins and
# the Python grouped-state operators always have (Spark's NormalizeFloatingNumbers).
DEDUPLICATION_NORMALISES_FLOATS = (4, 2)
# State rows with checksums (spark.sql.streaming.stateStore.rowChecksum.enabled, SPARK-54106): Spark 4.2. An
# older Spark reads such a row's checksum as part of its value.
ROW_CHECKSUMS = (4, 2)


# Python APIs of those features: a pipeline calling one on an older Spark fails with a bare AttributeError.
# Each: the API's name -> the feature it belongs to and the first Spark that has it.
NEWER_APIS = {
    "transformWithStateInPandas": ("transformWithState", TRANSFORM_WITH_STATE),
    "transformWithState": ("the row-based transformWithState", ROW_TRANSFORM_WITH_STATE),
    "StatefulProcessor": ("transformWithState (StatefulProcessor)", TRANSFORM_WITH_STATE),
    "StatefulProcessorHandle": ("transformWithState (StatefulProcessorHandle)", TRANSFORM_WITH_STATE),
}


def missing_api(error: Exception, running: tuple[int, int, int]) -> UnsupportedSparkFeature | None:
    """The clear error for a pipeline that used an API newer than the running Spark, else None.

    ``error`` is the AttributeError or ImportError the pipeline raised.
    """
    match = re.search(r"(?:has no attribute|cannot import name) '(\w+)'", str(error))
    if not match or match.group(1) not in NEWER_APIS:
        return None
    feature, needed = NEWER_APIS[match.group(1)]
    return _too_old(feature, needed, running) if running[:2] < needed else None


def require(feature: str, needed: tuple[int, int], running: tuple[int, int, int]) -> None:
    """Refuse ``feature`` on a Spark older than ``needed``, naming both versions."""
    if running[:2] < needed:
        raise _too_old(feature, needed, running)


def _too_old(feature: str, needed: tuple[int, int], running: tuple[int, int, int]) -> UnsupportedSparkFeature:
    return UnsupportedSparkFeature(
        f"{feature} needs Spark {_dotted(needed)} or newer; this job runs on Spark {_dotted(running)}. "
        f"Run it on Spark {_dotted(needed)}+ (the spark-submit of the connection) or leave {feature} out"
    )


def check_features(running: tuple[int, int, int], state_store: dict[str, Any], operators: list[dict]) -> None:
    """Refuse, before anything runs, a state store setting or stateful operator the running Spark lacks.

    Spark 3.5 ignores an unknown conf: asked for format version 2 it would silently write version 1.
    """
    if int(state_store.get("checkpoint_format_version") or 1) >= 2:
        require("spark.sql.streaming.stateStore.checkpointFormatVersion=2", CHECKPOINT_FORMAT_V2, running)
    if any(op.get("type") == "transformWithState" for op in operators):
        require("transformWithState", TRANSFORM_WITH_STATE, running)


# PySpark's transformWithState in processing-time mode (the mode a TTL on its state needs) fails in the empty
# batch Spark runs after each batch: TransformWithStateExec asks for another batch in that mode, and the Python
# operator's metrics throw a NullPointerException in it (INTERNAL_ERROR; the query stops making progress). Seen
# on 4.3.0; 4.0.5, 4.1.4 and 4.2.1 run the same query. With no-data batches off, every batch has data and it runs.
PYTHON_PROCESSING_TIME_STATE_NEEDS_DATA_BATCHES = ((4, 3), (4, 3))
NO_DATA_BATCHES_CONF = "spark.sql.streaming.noDataMicroBatches.enabled"


def check_processing_time_state(running: tuple[int, int, int], operators: list[dict], no_data_batches: str) -> None:
    """Refuse, before the query starts, a processing-time transformWithState that this Spark would fail in its
    first empty batch, unless ``spark.sql.streaming.noDataMicroBatches.enabled`` is ``false``."""
    first, last = PYTHON_PROCESSING_TIME_STATE_NEEDS_DATA_BATCHES
    if not first <= running[:2] <= last or no_data_batches.strip().lower() == "false":
        return
    for op in operators:
        mode = op.get("key", ["", ""])[-1] if op.get("type") == "transformWithState" else ""
        if str(mode).startswith("ProcessingTime"):
            raise UnsupportedSparkFeature(
                f"transformWithState in processing-time mode (a TTL on its state needs that mode) fails on Spark "
                f"{_dotted(running)} in the empty batch Spark runs after each batch (a NullPointerException, "
                f"INTERNAL_ERROR). Set {NO_DATA_BATCHES_CONF}=false (--conf): every batch then has data, and "
                "expired state and processing-time timers are handled in the next batch that has data"
            )


# -- Behaviour that differs --------------------------------------------------------------------------------


def progress_batch_rows(progress: Any) -> tuple[int, int]:
    """``(batchId, numInputRows)`` of an entry of ``query.recentProgress``.

    Spark 3.5 returns each entry as a dict parsed from the progress JSON; Spark 4.0 returns
    ``StreamingQueryProgress`` objects with attributes.
    """
    if isinstance(progress, dict):
        return int(progress["batchId"]), int(progress.get("numInputRows") or 0)
    return int(progress.batchId), int(progress.numInputRows)


# -- Snapshots taken on one Spark, restored on another -----------------------------------------------------


def restore_version_difference(snapshot_version: str | None, running_version: str) -> str | None:
    """Why a snapshot taken on ``snapshot_version`` cannot be restored on ``running_version``, else None.

    Spark reads the checkpoints of older versions, not of newer ones (a newer Spark may write state, offset
    and operator metadata formats an older one does not know). Patch releases of one minor version share
    their formats. Snapshots from before the version was recorded carry none and are not compared.
    """
    saved, running = parse_version(snapshot_version), parse_version(running_version)
    if saved is None or running is None or saved[:2] <= running[:2]:
        return None
    return (
        f"the snapshot was taken on Spark {snapshot_version} and this run uses Spark {running_version}: an "
        f"older Spark cannot read a newer one's state; run on Spark {_dotted(saved[:2])} or newer, or restore "
        f"from a savepoint taken before the upgrade"
    )


def upgrade_note(snapshot_version: str | None, running_version: str, state_store: dict[str, Any]) -> str | None:
    """What a restore onto a newer Spark minor version changes, for the log and the run's report."""
    saved, running = parse_version(snapshot_version), parse_version(running_version)
    if saved is None or running is None or saved[:2] >= running[:2]:
        return None
    changelog = "on" if state_store.get("changelog_checkpointing") else "off"
    return (
        f"restoring a snapshot taken on Spark {snapshot_version} into Spark {running_version}: the restored run "
        f"writes state as Spark {_dotted(running[:2])} does ({state_store.get('provider')}, checkpoint format "
        f"version {state_store.get('checkpoint_format_version', 1)}, changelog checkpointing {changelog}); "
        f"Spark {_dotted(saved[:2])} cannot restore the snapshots this run takes, so keep the savepoint you "
        "upgraded from to go back"
    )
