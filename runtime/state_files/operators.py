"""What a snapshot holds per stateful operator: kind, state store, partitions and state bytes."""

from __future__ import annotations

import json
import re
from typing import Any


def describe_operators(files: list[Any], fingerprint: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per stateful operator (``state/<op>/``) of a snapshot's file entries.

    Spark numbers stateful operators from the top of the plan down, the order the fingerprint lists them in.
    """
    operators: dict[int, dict[str, Any]] = {}
    for entry in files:
        parts = entry.target.split("/")
        if len(parts) < 3 or parts[0] != "state" or not parts[1].isdigit():
            continue
        op = operators.setdefault(int(parts[1]), {"partitions": set(), "state_bytes": 0, "files": 0})
        if parts[2].isdigit():
            op["partitions"].add(int(parts[2]))
        op["state_bytes"] += entry.size
        op["files"] += 1
    kinds = fingerprint.get("operators") or []
    store = (fingerprint.get("state_store") or {}).get("provider")
    if store is None:  # snapshots from before the state store was recorded: Spark's pinned conf says it
        pinned = (fingerprint.get("pinned_confs") or {}).get("spark.sql.streaming.stateStore.providerClass")
        store = pinned.rsplit(".", 1)[-1] if pinned else "HDFSBackedStateStoreProvider"
    return [
        {
            "operator": index,
            "kind": kinds[index].get("type") if index < len(kinds) else "unknown",
            "store": store,
            "partitions": len(op["partitions"]),
            "state_bytes": op["state_bytes"],
            "files": op["files"],
        }
        for index, op in sorted(operators.items())
    ]


OPERATOR_METADATA_V2 = re.compile(r"^state/(\d+)/_metadata/v2/\d+$")


def relocate_schema_paths(text: str, spark_location: str) -> str:
    """Point an operator metadata v2 file (``state/<op>/_metadata/v2/<n>``) at schema files in ``spark_location``.

    transformWithState's operator metadata names its state schema files by absolute path, in the working
    folder of the run that wrote it; a restore into a new working folder must name the new copies.
    """
    version, _, body = text.partition("\n")
    meta = json.loads(body)
    for store in meta.get("stateStoreInfo") or []:
        paths = store.get("stateSchemaFilePaths") or []
        store["stateSchemaFilePaths"] = [_relocated(path, spark_location) for path in paths]
    return f"{version}\n{json.dumps(meta, separators=(',', ':'))}"


def _relocated(path: str, spark_location: str) -> str:
    match = re.search(r"/(state/\d+/_stateSchema/.+)$", path)
    if not match:
        raise ValueError(f"state schema path {path!r} is not inside a state folder")
    return f"{spark_location.rstrip('/')}/{match.group(1)}"
