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
    "TransformWithState": "transformWithState",
    "Join": "join",
}
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
        op["key"] = [_render(expr) for expr in node.get("groupingExpressions", [])]
        op["state"] = sorted(_render(expr) for expr in node.get("aggregateExpressions", []) if _has_aggregate(expr))
    elif short.startswith("Deduplicate"):
        op["key"] = [_render([k]) for k in node.get("keys", [])]
    elif short == "Join":
        op["key"] = [str(node.get("joinType"))]
        op["state"] = [_render(node["condition"])] if node.get("condition") else []
    else:
        op["key"] = [_render(expr) for expr in node.get("groupingAttributes", [])]
    return op


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
    old_sources, new_sources = saved.get("sources", []), current.get("sources", [])
    if old_sources != new_sources:
        found.append(f"sources: [{', '.join(old_sources)}] became [{', '.join(new_sources)}]")
    for key, old_value in sorted((saved.get("pinned_confs") or {}).items()):
        new_value = current_confs.get(key)
        if new_value is not None and str(new_value) != str(old_value):
            found.append(f"conf {key}: {old_value} became {new_value}")
    return found


def _names(ops: list[dict[str, Any]]) -> str:
    return ", ".join(str(o.get("type")) for o in ops) or "none"
