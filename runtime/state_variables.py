"""A transformWithState state variable's rows, as Spark's state rewriter writes them (Spark 4.3+).

A transformWithState operator keeps each state variable in column families of its one RocksDB store: the
variable's own family, plus families Spark derives from it and keeps consistent on every write:

- a value state ``NAME``: the grouping key → the value; with a TTL the value is ``{value, ttlExpirationMs}``
  and ``$ttl_NAME`` indexes each key by its expiration (``{expirationMs, elementKey}`` → an empty row);
- a list state ``NAME``: one row per element under the grouping key (Spark merges them into a list, in
  order); ``$rowCounter_NAME`` holds the element count, or with a TTL ``$count_NAME`` does and ``$min_NAME``
  the earliest expiration, indexed by ``$ttl_NAME`` once per key;
- a map state ``NAME``: ``{key, userKey}`` → the value (with a TTL ``{value, ttlExpirationMs}``), indexed by
  ``$ttl_NAME`` per entry;
- the registered timers: ``$procTimers_keyToTimestamp`` (``$eventTimers_…`` in event time) holds
  ``{key, expiryTimestampMs}``, and ``…_timestampToKey`` the same pairs the other way round, which Spark scans
  in order to fire them (both → an empty row).

Spark's rewriter hands each family's rows as decoded ``UnsafeRow`` bytes and encodes what it gets back with
the family's own encoder, so the bytes written here are plain rows of those schemas (``unsafe_rows``). A
transform replaces the variable's family and rebuilds its derived ones from the new rows, so an index never
names a row that is gone: Spark's TTL eviction removes the row an index entry names without checking it, and
a stale entry would delete a fresh value. Timers and every other variable pass through unchanged. The
function sees a variable as Spark's state source reads it unflattened: ``key`` with ``value`` (value
state), ``list_value`` (an array, in the list's order) or ``map_value`` (a map); with a TTL each value is the
stored ``{value, ttlExpirationMs}`` struct, so a function keeps, changes or sets each expiration. The timers
are transformed as Spark's source reads them: one row per timer, ``key`` and ``expiration_timestamp_ms``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_checkpoint_runtime.rocksdb_transform import (
    RocksDBTransformError,
    partition_key_column,
    with_families_replaced,
)
from spark_checkpoint_runtime.transform_rows import TransformRefused, encoder, raw_column, stored_value
from spark_checkpoint_runtime.unsafe_rows import write_row

VALUE, LIST, MAP, TIMERS = "ValueState", "ListState", "MapState", "TimerState"
# The column the state source gives each kind's values in, read with flattenCollectionTypes=false.
VALUE_COLUMNS = {VALUE: "value", LIST: "list_value", MAP: "map_value", TIMERS: "expiration_timestamp_ms"}
TIMER_FAMILIES = ("_keyToTimestamp", "_timestampToKey")
TTL_FIELD = "ttlExpirationMs"
# A family Spark derives from a variable: ``$<what>_<variable>`` (``$ttl_count``, ``$rowCounter_recent``).
_DERIVED = re.compile(r"\$([^_]+)_(.+)")
# The value of every index family's row: one null field.
EMPTY_ROW = write_row([None], [{"name": "__empty__", "type": "void"}])


@dataclass(frozen=True)
class StateVariable:
    """One state variable of a transformWithState operator: its name, kind (``ValueState``, ``ListState``,
    ``MapState``) and whether it has a TTL; or its timers (``TimerState``, named by their families' prefix,
    ``$procTimers`` or ``$eventTimers``)."""

    name: str
    kind: str
    ttl: bool

    @property
    def value_column(self) -> str:
        """The column holding its values in the rows a transform function gets and returns."""
        return VALUE_COLUMNS[self.kind]

    def families(self) -> set[str]:
        """The column families Spark keeps for it: its own and those derived from it (Spark 4.3)."""
        if self.kind == TIMERS:
            return {f"{self.name}{suffix}" for suffix in TIMER_FAMILIES}
        if self.kind == LIST:
            derived = {"ttl", "min", "count"} if self.ttl else {"rowCounter"}
        else:
            derived = {"ttl"} if self.ttl else set()
        return {self.name, *(f"${prefix}_{self.name}" for prefix in derived)}


def declared(operator_properties: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The operator properties JSON of Spark's ``state-metadata`` row, and the state variables it declares
    (timers included); empty for what is not that JSON."""
    try:
        properties = json.loads(operator_properties or "{}")
    except ValueError:
        return {}, []
    if not isinstance(properties, dict):
        return {}, []
    variables = properties.get("stateVariables")
    return properties, [v for v in variables if isinstance(v, dict)] if isinstance(variables, list) else []


def state_variable(operator_properties: str | None, name: str, operator: int) -> StateVariable:
    """The variable ``name`` as Spark's ``state-metadata`` row of the operator describes it; ``TransformRefused``
    naming the variables there are when it has none of that name, or one transform cannot write."""
    _, found = declared(operator_properties)
    named = {str(v.get("stateName")): v for v in found if v.get("stateVariableType") != TIMERS}
    if name not in named:
        raise TransformRefused(
            f"operator {operator} has no state variable {name!r}; it has: {', '.join(sorted(named)) or 'none'}"
        )
    kind = str(named[name].get("stateVariableType"))
    if kind not in (VALUE, LIST, MAP):
        raise TransformRefused(f"state variable {name!r} is a {kind}, which transform cannot write")
    return StateVariable(name, kind, bool(named[name].get("ttlEnabled")))


def registered_timers(operator_properties: str | None, operator: int) -> StateVariable:
    """The operator's registered timers as Spark's ``state-metadata`` row describes them; ``TransformRefused``
    when its time mode has none."""
    properties, found = declared(operator_properties)
    for variable in found:
        name = str(variable.get("stateName") or "")
        if variable.get("stateVariableType") == TIMERS and name.endswith(TIMER_FAMILIES[0]):
            return StateVariable(name.removesuffix(TIMER_FAMILIES[0]), TIMERS, False)
    raise TransformRefused(f"operator {operator} has no timers (its time mode is {properties.get('timeMode')})")


def variable_names(operator_properties: str | None) -> list[str]:
    """A transformWithState operator's state variables (timers left out), from the ``operatorProperties`` of
    Spark's ``state-metadata``; empty for every other operator."""
    _, variables = declared(operator_properties)
    return [str(v["stateName"]) for v in variables if v.get("stateName") and v.get("stateVariableType") != TIMERS]


def transformed_variable(
    spark: Any, location: str, operator: int, state_var: str | None, with_timers: bool = False
) -> tuple[str | None, StateVariable | None]:
    """The operator's name in the Spark checkpoint folder at ``location`` (None: no such operator, which reading
    its rows refuses) and, for a transformWithState operator, the state variable ``state_var`` names or its
    timers; refuses a variable or timers for any other operator and a transformWithState operator without
    either."""
    stores = spark.read.format("state-metadata").load(location).collect()
    found = [row for row in stores if int(row["operatorId"]) == operator]
    if not found:
        return None, None  # reading its rows refuses it, naming the operators there are
    name, properties = str(found[0]["operatorName"]), found[0].asDict().get("operatorProperties")
    if not name.startswith("transformWithState"):
        if state_var is not None or with_timers:
            option = "--timers" if with_timers else "--state-var"
            raise TransformRefused(f"{option} is for a transformWithState operator; operator {operator} is {name}")
        return name, None
    if with_timers:
        return name, registered_timers(properties, operator)
    if state_var is None:
        names = sorted(variable_names(properties))
        raise TransformRefused(
            f"operator {operator} is {name}, whose state is transformed one state variable at a time: name one "
            f"with --state-var ({', '.join(names) or 'it has none'}), or its timers with --timers"
        )
    return name, state_variable(properties, state_var, operator)


def unknown_families(variable: StateVariable, present: set[str]) -> set[str]:
    """Families in ``present`` derived from ``variable`` (``$<what>_<name>``) that this module does not rebuild:
    a Spark that keeps more than 4.3 does. Passing them through unchanged could leave them naming rows that are
    gone."""
    return {
        family for family in present if (match := _DERIVED.fullmatch(family)) and match.group(2) == variable.name
    } - variable.families()


def checked_values(frame: Any, variable: StateVariable) -> None:
    """Refuse what no family may hold: a null list element or map value, a TTL variable's row without its
    expiration (Spark sets one on every write; a row without one would never expire, nor could be indexed)."""
    from pyspark.sql import functions as F

    column = F.col(variable.value_column)
    if variable.kind in (VALUE, TIMERS):
        values = F.array(column)
    elif variable.kind == LIST:
        values = column
    else:
        values = F.map_values(column)
    if variable.ttl:  # the stored struct, its value and its expiration must all be there
        bad = F.exists(values, lambda v: v.isNull() | v["value"].isNull() | v[TTL_FIELD].isNull())
    else:
        bad = F.exists(values, lambda v: v.isNull())
    found = frame.where(bad).select("key").first()
    if found is not None:
        if variable.kind == TIMERS:
            what, where = f"a null {variable.value_column}", "a timer"
        else:
            what = f"a null value, or one without its value or {TTL_FIELD}," if variable.ttl else "a null value"
            where = f"state variable {variable.name!r}"
        raise TransformRefused(f"the function returned {what} in {where} for the key {found['key'].asDict()}")


def counted_timers(frame: Any) -> int:
    """The number of timers the function returned; refuses a null key and a timer returned twice (Spark keeps
    one per key and time: a second would be lost, not fire twice)."""
    from pyspark.sql import functions as F

    per_timer = frame.groupBy("key", VALUE_COLUMNS[TIMERS]).count()
    totals = per_timer.agg(
        F.sum("count").alias("rows"), F.max("count").alias("most"), F.count_if(F.col("key").isNull()).alias("null_keys")
    ).first()
    if totals["null_keys"]:
        raise TransformRefused("the function returned a timer whose key is null")
    if (totals["most"] or 0) > 1:
        twice = per_timer.where("count > 1").first()
        raise TransformRefused(
            f"the function returned the timer of key {twice['key']} at {twice[VALUE_COLUMNS[TIMERS]]} more than once"
        )
    return int(totals["rows"] or 0)


def variable_replacement(frame: Any, variable: StateVariable) -> Callable[[Any], Any]:
    """For Spark's rewriter: the store's rows (every column family) with ``variable``'s families rebuilt from
    the function's result ``frame``; refuses a Spark keeping a family of it this module does not rebuild.

    Keys are written as the function gives them, never normalised: transformWithState keys its state by the
    grouping key's bytes as a batch's rows have them (``transform_rows.normalises_float_keys``)."""

    def replacement(found: Any) -> Any:
        present = {str(row[0]) for row in found.select("column_family_name").distinct().collect()}
        unknown = unknown_families(variable, present)
        if unknown:
            raise RocksDBTransformError(
                f"Spark keeps column families {sorted(unknown)} for state variable {variable.name!r}, which "
                "transform cannot rebuild"
            )
        written = variable_rows(frame, variable, found.schema["partition_key"].dataType)
        return with_families_replaced(found, variable.families(), written)

    return replacement


def variable_rows(frame: Any, variable: StateVariable, partition_type: Any) -> Any:
    """The rows of ``variable``'s families for the function's result ``frame`` (``key`` and the variable's
    value column, checked), as the rewriter takes them: ``partition_key``, ``key_bytes``, ``value_bytes``,
    ``column_family_name``. An empty list or map leaves the key without the variable."""
    from pyspark.sql import functions as F

    key_type = frame.schema["key"].dataType
    grouping = key_type.jsonValue()
    values_type = frame.schema[variable.value_column].dataType
    keyed = frame.select(
        partition_key_column(F.col("key"), key_type, partition_type, False).alias("partition_key"),
        raw_column(F.col("key"), key_type).alias("raw_key"),
        F.col(variable.value_column).alias("values"),
    )
    encode_key = _encoder(key_type)

    def family(rows: Any, name: str, key_bytes: Any, value_bytes: Any) -> Any:
        """``rows`` as family ``name``'s, in the rewriter's columns."""
        return rows.select(
            "partition_key",
            key_bytes.alias("key_bytes"),
            value_bytes.alias("value_bytes"),
            F.lit(name).alias("column_family_name"),
        )

    empty = F.lit(bytearray(EMPTY_ROW))
    long_row = _row_encoder(["long"])
    if variable.kind == TIMERS:
        forward = _row_encoder([grouping, "long"])("raw_key", "values")
        backward = _row_encoder(["long", grouping])("values", "raw_key")
        by_key, by_time = (f"{variable.name}{suffix}" for suffix in TIMER_FAMILIES)
        return _union([family(keyed, by_key, forward, empty), family(keyed, by_time, backward, empty)])
    if variable.kind == VALUE:
        stored = values_type
        entries = keyed.select("partition_key", "raw_key", raw_column(F.col("values"), stored).alias("raw_value"))
        found = [family(entries, variable.name, encode_key("raw_key"), _encoder(stored)("raw_value"))]
        if variable.ttl:
            index = _row_encoder(["long", grouping])
            expiry = F.col("raw_value")[TTL_FIELD]
            found.append(family(entries, f"$ttl_{variable.name}", index(expiry, "raw_key"), empty))
        return _union(found)
    if variable.kind == LIST:
        stored = values_type.elementType
        # explode keeps a key's elements consecutive and in order, in one task; Spark's shuffle keeps a task's
        # rows in order, and the rewriter merges them into the list in that order (as its own repartition does).
        elements = keyed.select("partition_key", "raw_key", F.explode("values").alias("element"))
        elements = elements.select("partition_key", "raw_key", raw_column(F.col("element"), stored).alias("raw"))
        found = [family(elements, variable.name, encode_key("raw_key"), _encoder(stored)("raw"))]
        lists = keyed.where(F.size("values") > 0)
        count = long_row(F.size("values").cast("long"))
        if not variable.ttl:
            return _union([*found, family(lists, f"$rowCounter_{variable.name}", encode_key("raw_key"), count)])
        earliest = F.array_min(F.transform("values", lambda v: v[TTL_FIELD]))
        lists = lists.withColumn("earliest", earliest)
        index = _row_encoder(["long", grouping])
        return _union(
            [
                *found,
                family(lists, f"$count_{variable.name}", encode_key("raw_key"), count),
                family(lists, f"$min_{variable.name}", encode_key("raw_key"), long_row("earliest")),
                family(lists, f"$ttl_{variable.name}", index("earliest", "raw_key"), empty),
            ]
        )
    user_key, stored = values_type.keyType, values_type.valueType
    entries = keyed.select("partition_key", "raw_key", F.explode(F.map_entries("values")).alias("entry")).select(
        "partition_key",
        "raw_key",
        raw_column(F.col("entry.key"), user_key).alias("raw_user_key"),
        raw_column(F.col("entry.value"), stored).alias("raw_value"),
    )
    composite = [grouping, user_key.jsonValue()]
    map_key = _row_encoder(composite)("raw_key", "raw_user_key")
    found = [family(entries, variable.name, map_key, _encoder(stored)("raw_value"))]
    if variable.ttl:
        # The index names an entry by its whole key, {key, userKey}, nested in the index's key.
        nested = {"type": "struct", "fields": [{"name": f"_{i}", "type": t} for i, t in enumerate(composite)]}
        index = _row_encoder(["long", nested])
        element = F.struct("raw_key", "raw_user_key")
        found.append(family(entries, f"$ttl_{variable.name}", index(F.col("raw_value")[TTL_FIELD], element), empty))
    return _union(found)


def _encoder(stored_type: Any) -> Any:
    """A UDF writing a raw struct of ``stored_type`` as its ``UnsafeRow`` bytes, as given."""
    return encoder(stored_type.jsonValue()["fields"], False)


def _row_encoder(types: list[Any]) -> Any:
    """A UDF writing its arguments (raw values, ``raw_column``'s form) as one ``UnsafeRow`` whose fields have
    ``types`` (JSON form), as given."""
    from pyspark.sql import functions as F

    fields = [{"name": f"_{i}", "type": t} for i, t in enumerate(types)]

    def encode(*values):  # no type hints: PySpark would read them as a pandas UDF's
        return write_row([stored_value(v, t) for v, t in zip(values, types, strict=True)], fields)

    return F.udf(encode, "binary")


def _union(frames: list[Any]) -> Any:
    """The rows of every frame (same columns)."""
    found = frames[0]
    for frame in frames[1:]:
        found = found.unionByName(frame)
    return found
