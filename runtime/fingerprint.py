"""The stateful plan's fingerprint and the compatibility check before a restore.

Spark keeps state per stateful operator, keyed by its grouping key, with a schema fixed by its aggregate
functions; it also pins some confs (``spark.sql.shuffle.partitions`` among them) in its offset log and
silently overrides a changed value on restart. The fingerprint records what must not change:

- ``operators``: each stateful operator in plan order with its key (names and types) and state
  (aggregate functions and their input types);
- ``sources``: the number and kinds of sources;
- ``pinned_confs``: Spark's pinned confs as the checkpointed query ran with them.

A filter or projection that leaves operators and keys alone changes nothing here and is allowed.
"""

from __future__ import annotations

import json
import re
from typing import Any

STATEFUL_OPERATORS = {
    "Aggregate": "aggregation",
    "Deduplicate": "deduplication",
    "DeduplicateWithinWatermark": "deduplication within watermark",
    "FlatMapGroupsWithState": "flatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
    "TransformWithState": "transformWithState",
    "TransformWithStateInPandas": "transformWithState",
    "TransformWithStateInPySpark": "transformWithState",
    "Join": "join",
}
SESSION_WINDOW = "session window aggregation"

# The state store: which provider wrote the state files and in which checkpoint format. Spark cannot read one
# provider's files with another, nor format v1 files as v2. The changelog setting may change (Spark reads both).
PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
FORMAT_VERSION_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
HDFS_PROVIDER = "HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "RocksDBStateStoreProvider"
SNAPSHOTTABLE_PROVIDERS = (HDFS_PROVIDER, ROCKSDB_PROVIDER)
_DROPPED_KEYS = {"exprId", "resultId", "qualifier", "jvmId", "metadata", "nonInheritableMetadataKeys"}


class IncompatibleRestore(ValueError):
    """The new pipeline cannot continue from the snapshot's state; ``differences`` lists why."""

    def __init__(self, location: str, differences: list[str]):
        self.differences = differences
        super().__init__(
            f"incompatible restore from {location}: "
            + "; ".join(differences)
            + ". Restore from a compatible checkpoint, revert the change, or pass --restore-from none "
            "to start fresh (state is then rebuilt from the sources, not carried over)"
        )


def plan_fingerprint(df: Any) -> dict[str, Any]:
    """Fingerprint an unstarted streaming DataFrame (py4j access to its analyzed logical plan)."""
    nodes = json.loads(df._jdf.queryExecution().analyzed().toJSON())
    return fingerprint_from_plan_json(nodes)


def fingerprint_from_plan_json(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Extract operators and sources from a Catalyst plan as serialized by ``TreeNode.toJSON``."""
    operators, sources = [], []
    for node in nodes:
        short = node["class"].rsplit(".", 1)[-1]
        if short in STATEFUL_OPERATORS:
            operators.append(_operator(short, node))
        elif short.startswith("StreamingRelation") or short == "StreamingExecutionRelation":
            name = str(node.get("sourceName") or node.get("source") or short)
            sources.append(name.split("[", 1)[0])
    return {"operators": operators, "sources": sources}


def _operator(short: str, node: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"type": STATEFUL_OPERATORS[short]}
    if short == "Aggregate":
        grouping = node.get("groupingExpressions", [])
        op["key"] = [_render(expr) for expr in grouping]
        op["state"] = sorted(_render(expr) for expr in node.get("aggregateExpressions", []) if _has_aggregate(expr))
        if any(_is_session_window(expr) for expr in grouping):
            op["type"] = SESSION_WINDOW  # its state (sessions per key) is laid out unlike a plain aggregation's
    elif short.startswith("Deduplicate"):
        op["key"] = [_render(k) for k in node.get("keys", [])]
    elif short == "Join":
        op["type"] = f"{_join_type(node.get('joinType'))} join"
        op["key"] = [_render(node["condition"])] if node.get("condition") else []
    elif short.startswith("TransformWithState"):
        # The state variables live in the processor (Spark checks their schemas itself on restart).
        op["key"] = [f"{node.get('groupingAttributesLen')} grouping column(s)", _object_name(node.get("timeMode"))]
    else:
        op["key"] = [_render(expr) for expr in node.get("groupingAttributes", [])]
        if node.get("stateType") is not None:
            op["state"] = [_type(node.get("stateType")), f"timeout {_object_name(node.get('timeout'))}"]
    return op


def _object_name(value: Any) -> str:
    """``{"object": "org.apache.spark...Inner$"}`` -> ``Inner``."""
    name = value.get("object", "") if isinstance(value, dict) else str(value or "")
    return name.rsplit(".", 1)[-1].rstrip("$")


def _join_type(value: Any) -> str:
    return _snake(_object_name(value)).replace("_", " ") or "unknown"


def _is_session_window(expr: list[dict[str, Any]] | dict[str, Any]) -> bool:
    nodes = expr if isinstance(expr, list) else [expr]
    return any(
        n.get("name") == "session_window" or "spark.sessionWindow" in (n.get("metadata") or {})
        for n in nodes
        if isinstance(n, dict)
    )


def _has_aggregate(expr: list[dict[str, Any]]) -> bool:
    return any(n["class"].endswith("AggregateExpression") for n in expr)


def _render(expr: list[dict[str, Any]] | dict[str, Any]) -> str:
    """Render a flattened expression (pre-order list with ``num-children``) without expression ids."""
    nodes = expr if isinstance(expr, list) else [expr]
    text, _ = _render_at(nodes, 0)
    return text


def _render_at(nodes: list[dict[str, Any]], index: int) -> tuple[str, int]:
    node = nodes[index]
    short = node["class"].rsplit(".", 1)[-1]
    index += 1
    children = []
    for _ in range(int(node.get("num-children", 0))):
        child, index = _render_at(nodes, index)
        children.append(child)
    if short == "AttributeReference":
        return f"{node.get('name')}: {_type(node.get('dataType'))}", index
    if short == "Literal":
        return f"{node.get('value')}: {_type(node.get('dataType'))}", index
    if short == "Alias":  # the output name does not shape state
        return children[0] if children else "", index
    if short == "AggregateExpression":
        distinct = "distinct " if node.get("isDistinct") else ""
        return f"{distinct}{children[0] if children else ''}", index
    return f"{_snake(short)}({', '.join(children)})", index


def _type(data_type: Any) -> str:
    return data_type if isinstance(data_type, str) else json.dumps(data_type, sort_keys=True)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def state_store_settings(spark: Any) -> dict[str, Any]:
    """The session's state store: provider class (short name), checkpoint format version, changelog on/off."""
    provider = _conf(spark, PROVIDER_CONF) or HDFS_PROVIDER
    return {
        "provider": provider.rsplit(".", 1)[-1],
        "provider_class": provider,
        "checkpoint_format_version": int(_conf(spark, FORMAT_VERSION_CONF) or 1),
        # Not a registered conf (RocksDB reads its confs by prefix): asking without a default raises in the
        # JVM, and converting that exception costs a restart about 20 ms.
        "changelog_checkpointing": (_conf(spark, CHANGELOG_CONF, "false") or "false").lower() == "true",
    }


def _conf(spark: Any, key: str, default: str | None = None) -> str | None:
    """The session's value of ``key``: Spark's own default for a registered conf, else ``default``."""
    try:
        return spark.conf.get(key) if default is None else spark.conf.get(key, default)
    except Exception:  # noqa: BLE001 - a conf unknown to this Spark has no value here
        return default


def pinned_conf_values(spark: Any, keys: list[str]) -> dict[str, str | None]:
    """The session's current values of Spark's pinned confs (None where the session has none)."""
    values = {}
    for key in keys:
        try:
            values[key] = spark.conf.get(key, None)
        except Exception:  # noqa: BLE001 - a conf unknown to this Spark has no value here
            values[key] = None
    return values


def differences(
    saved: dict[str, Any],
    current: dict[str, Any],
    current_confs: dict[str, str | None],
    *,
    allow_non_restored_state: bool = False,
) -> list[str]:
    """What differs between a snapshot's fingerprint and the new pipeline's; empty when compatible.

    ``allow_non_restored_state`` (Flink's name) accepts a new pipeline with fewer stateful operators when
    the ones it keeps match the snapshot's first ones in order, key and state schema: the state of the
    dropped trailing operators is then not restored. Every other difference still counts.
    """
    found: list[str] = []
    old_ops, new_ops = saved.get("operators", []), current.get("operators", [])
    dropping = allow_non_restored_state and len(new_ops) < len(old_ops)
    if len(old_ops) != len(new_ops) and not dropping:
        found.append(
            f"stateful operators: snapshot has {len(old_ops)} ({_names(old_ops)}), "
            f"new pipeline has {len(new_ops)} ({_names(new_ops)})"
        )
    for index, (old, new) in enumerate(zip(old_ops, new_ops, strict=False)):
        if old.get("type") != new.get("type"):
            found.append(f"operator {index}: {old.get('type')} became {new.get('type')}")
            continue
        for part, label in (("key", "key"), ("state", "state schema")):
            if old.get(part) != new.get(part):
                found.append(
                    f"operator {index} ({old.get('type')}) {label}: "
                    f"[{', '.join(old.get(part) or [])}] became [{', '.join(new.get(part) or [])}]"
                )
    if old_ops and new_ops:
        found.extend(_state_store_differences(saved, current))
    old_sources, new_sources = saved.get("sources", []), current.get("sources", [])
    if old_sources != new_sources:
        found.append(f"sources: [{', '.join(old_sources)}] became [{', '.join(new_sources)}]")
    for key, old_value in sorted((saved.get("pinned_confs") or {}).items()):
        if key == PROVIDER_CONF:
            continue  # compared as the state store above, with what to do about it
        new_value = current_confs.get(key)
        if new_value is not None and str(new_value) != str(old_value):
            found.append(f"conf {key}: {old_value} became {new_value}")
    return found


def snapshot_state_store(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The state store a snapshot's fingerprint records (``state_store_settings``' keys), or ``{}``.

    Snapshots written before the fingerprint had ``state_store`` (or its ``provider_class``) name only the class
    Spark pinned: that fills ``provider`` and ``provider_class``. Neither recorded gives ``{}``.
    """
    found = dict(fingerprint.get("state_store") or {})
    pinned = str((fingerprint.get("pinned_confs") or {}).get(PROVIDER_CONF) or "")
    if pinned:
        found.setdefault("provider", pinned.rsplit(".", 1)[-1])
        found.setdefault("provider_class", pinned)
    return found


def _state_store_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    old = snapshot_state_store(saved)
    new = current.get("state_store") or {}
    if not old or not new:
        return []
    found = []
    if old.get("provider") != new.get("provider"):
        found.append(
            f"state store: the snapshot's state was written by {old.get('provider')}, the new pipeline uses "
            f"{new.get('provider')} (Spark cannot read one provider's files with the other; set "
            f"{PROVIDER_CONF}={old.get('provider_class', old.get('provider'))} to restore this snapshot)"
        )
    elif (was := old.get("checkpoint_format_version", 1)) != (now := new.get("checkpoint_format_version", 1)):
        found.append(
            f"state store checkpoint format: the snapshot was written in format v{was}, the new pipeline uses "
            f"v{now} (set {FORMAT_VERSION_CONF}={was} to restore this snapshot)"
        )
    return found


def _names(ops: list[dict[str, Any]]) -> str:
    return ", ".join(str(o.get("type")) for o in ops) or "none"
