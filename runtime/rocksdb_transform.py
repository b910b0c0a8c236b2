"""Transform of RocksDB state: the function's rows written by Spark's own state rewriter (Spark 4.3+).

A RocksDB store's files are RocksDB's own, so they are written by RocksDB: Spark 4.3's ``StateRewriter`` (the
machinery of its offline state repartition) reads every store of the checkpoint folder, hands each one's rows
to a function as raw ``UnsafeRow`` bytes (``partition_key``, ``key_bytes``, ``value_bytes``,
``column_family_name``) and writes what it returns as a full snapshot of the next batch. The function given
here (through the session's py4j gateway) passes every store through unchanged except the one asked for, whose
rows become the transform's result, encoded as Spark's exact bytes (``unsafe_rows.write_row``). Every store
ends in the partition Spark's own shuffle sends its ``partition_key`` to (``repartition`` by it, as Spark's
repartition does), except a store whose key has no columns, which Spark keeps in partition 0 (``placed``).

The working folder gets batch N+1: its offset entry is batch N's, its commit is batch N's (with the state's
new checkpoint ids under checkpoint format version 2), as Spark's repartition writes it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from spark_checkpoint_runtime.key_partitioning import partition_of
from spark_checkpoint_runtime.spark_versions import OFFLINE_REPARTITION
from spark_checkpoint_runtime.state_files.schema import single_partition
from spark_checkpoint_runtime.unsafe_rows import type_name

# Spark's rewriter arrived with its offline repartition.
STATE_REWRITER_VERSION = OFFLINE_REPARTITION
DEFAULT_COLUMN_FAMILY = "default"


class RocksDBTransformError(ValueError):
    """The RocksDB store cannot be written as asked (nothing was saved)."""


class _StoreRewrite:
    """Spark's ``StateRewriter`` calls ``apply`` once per store with that store's rows (a Java DataFrame); it
    returns the rows to write, placed in the partition Spark's shuffle sends each ``partition_key`` to.

    ``replacement`` takes the target store's rows (every column family) and returns all the rows it keeps, in
    ``conformed`` form."""

    def __init__(self, spark: Any, operator: int, store: str, replacement: Any, partitions: int):
        self.spark, self.target, self.replacement, self.partitions = spark, (operator, store), replacement, partitions
        self.error: Exception | None = None
        self.replaced = False
        self.zero: set[tuple[int, str]] = set()  # stores kept in partition 0 alone (``single_partition_stores``)

    def apply(self, jdf: Any) -> Any:
        from pyspark.sql import DataFrame

        try:
            found = DataFrame(jdf, self.spark)
            options = jdf.queryExecution().logical().options()
            which = (int(options.get("operatorId").get()), str(options.get("storeName").get()))
            if which == self.target:
                found = self.replacement(found)
                self.replaced = True
            return placed(found, self.partitions, which in self.zero)._jdf
        except Exception as exc:  # said by py4j to Spark only as "a Python proxy raised": kept to be raised here
            self.error = exc
            raise

    class Java:
        implements = ["scala.Function1"]


def only_default_family(found: Any, which: tuple[int, str]) -> None:
    """Refuse a store keeping column families of its own (a join's state format 3): its rows are written as
    one key and value schema, the default family's."""
    from pyspark.sql import functions as F

    families = found.where(F.col("column_family_name") != DEFAULT_COLUMN_FAMILY).limit(1).collect()
    if families:
        raise RocksDBTransformError(
            f"operator {which[0]} store {which[1]!r} keeps column family "
            f"{families[0]['column_family_name']!r} (a join's state format 3), which transform cannot write yet"
        )


def with_families_replaced(found: Any, families: set[str], rows: Any) -> Any:
    """The store's rows ``found`` with those of column ``families`` replaced by ``rows``."""
    from pyspark.sql import functions as F

    kept = found.where(~F.col("column_family_name").isin(sorted(families)))
    return kept.unionByName(conformed(rows, found.schema))


def placed(frame: Any, partitions: int, zero: bool) -> Any:
    """``frame`` in ``partitions`` partitions, each row in the one Spark's stateful operator looks for it in.

    Spark's own repartition hashes ``partition_key``. A store kept in partition 0 alone (``zero``: a global
    aggregation's, a limit's) has an empty or null key, which hashes to ``pmod(42, N)``: its state would be
    written where the query never looks (partition 2 of 4), and silently lost. It goes to partition 0.
    """
    from pyspark.sql import functions as F

    if not zero:
        return frame.repartition(partitions, F.col("partition_key"))
    return frame.repartition(partitions, F.lit(zero_partition_value(partitions)))


def zero_partition_value(partitions: int) -> int:
    """An integer Spark's hash partitioning sends to partition 0 of ``partitions``."""
    return next(value for value in range(1 << 20) if partition_of([value], ["integer"], partitions) == 0)


def single_partition_stores(spark: Any, location: str) -> dict[int, list[str]]:
    """The operators of the Spark checkpoint folder at ``location`` that keep their state in partition 0 alone
    (every store's key has no columns, or it is a limit: ``state_files.schema.single_partition``), and their
    stores."""
    stores: dict[tuple[int, str], list[str]] = {}
    for row in spark.read.format("state-metadata").load(location).collect():
        operator, store, name = int(row["operatorId"]), str(row["stateStoreName"]), str(row["operatorName"])
        stores.setdefault((operator, name), []).append(store)
    found = {}
    for (operator, name), names in sorted(stores.items()):
        if name.startswith("transformWithState"):
            continue  # always keyed (its grouping key), and its store is read per state variable
        keys = [
            json.loads(
                spark.read.format("statestore")
                .option("operatorId", operator)
                .option("storeName", store)
                .load(location)
                .schema["key"]
                .dataType.json()
            )["fields"]
            for store in names
        ]
        if all(single_partition(fields, name, higher_partitions=True) for fields in keys):
            found[operator] = names
    return found


def keep_partition_zero(location: Path, operators: set[int]) -> None:
    """Remove the partition folders above 0 of ``operators`` (``single_partition_stores``) that Spark's rewriter
    wrote: Spark keeps such an operator's state in partition 0 alone and writes no later version elsewhere, so a
    folder holding only the rewritten version would leave every later checkpoint unable to rebuild it."""
    for operator in operators:
        for folder in (location / "state" / str(operator)).iterdir():
            if folder.name.isdigit() and int(folder.name) > 0:
                shutil.rmtree(folder)


def conformed(frame: Any, schema: Any) -> Any:
    """``frame`` with exactly ``schema``'s types and nullability: Spark's rewriter requires the schema it gave."""
    from pyspark.sql import functions as F

    columns = []
    for field in schema.fields:
        column = frame[field.name].cast(field.dataType)  # a struct's cast takes the target's field nullability
        columns.append((F.when(column.isNotNull(), column) if field.nullable else column).alias(field.name))
    return frame.select(*columns)


def partition_key_column(key: Any, key_type: Any, partition_type: Any, normalise: bool) -> Any:
    """The ``partition_key`` struct of a key column: its leading fields, as the operator's shuffle partitions
    (a session window's key without the session's start, a join's key without the value's index); with
    ``normalise`` a float or double -0.0 as 0.0, as the operator hashes it."""
    from pyspark.sql import functions as F

    wanted, fields = partition_type.fields, key_type.fields
    if len(wanted) > len(fields) or any(
        w.dataType.simpleString() != f.dataType.simpleString() for w, f in zip(wanted, fields, strict=False)
    ):
        raise RocksDBTransformError(
            f"the store's partition key {partition_type.simpleString()} is not the leading fields of its key "
            f"{key_type.simpleString()}: transform cannot place new rows"
        )
    leading = zip(wanted, fields[: len(wanted)], strict=True)
    columns = [_normalised_column(key[f.name], f.dataType, normalise).alias(w.name) for w, f in leading]
    return F.struct(*columns)


def _normalised_column(column: Any, data_type: Any, normalise: bool) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StructType

    name = type_name(json.loads(data_type.json()))
    if normalise and name in ("float", "double"):
        return F.when(column == 0, F.lit(0).cast(data_type)).otherwise(column)  # -0.0 == 0 holds in Spark
    if isinstance(data_type, StructType):
        inner = [_normalised_column(column[f.name], f.dataType, normalise).alias(f.name) for f in data_type.fields]
        return F.when(column.isNotNull(), F.struct(*inner))
    if isinstance(data_type, ArrayType):
        return F.transform(column, lambda element: _normalised_column(element, data_type.elementType, normalise))
    return column


def rewrite(spark: Any, location: Path, batch_id: int, rewrite_store: _StoreRewrite) -> int:
    """Write batch ``batch_id + 1`` of the Spark checkpoint folder at ``location`` (local): every store's state
    as ``rewrite_store`` returns it. The batch written."""
    from pyspark.java_gateway import ensure_callback_server_started

    written = batch_id + 1
    for log in ("offsets", "commits"):
        if (location / log / str(written)).exists():
            raise RocksDBTransformError(f"{location / log / str(written)} exists: the snapshot is not its last batch")
    shutil.copyfile(location / "offsets" / str(batch_id), location / "offsets" / str(written))
    zero = single_partition_stores(spark, location.as_uri())
    rewrite_store.zero = {(operator, store) for operator, stores in zero.items() for store in stores}
    jvm = spark._jvm  # the rewriter has no Python API: it is called through the session's gateway
    ensure_callback_server_started(spark.sparkContext._gateway)  # the rewriter calls back into this process
    rewriter = jvm.org.apache.spark.sql.execution.streaming.state.StateRewriter(
        spark._jsparkSession,
        batch_id,
        written,
        location.as_uri(),
        spark._jsparkSession.sessionState().newHadoopConf(),
        jvm.scala.Option.apply(None),
        jvm.scala.Some(rewrite_store),
        jvm.scala.Option.apply(None),
    )
    try:
        ids = rewriter.run()
    except Exception:
        if rewrite_store.error is not None:
            raise rewrite_store.error from None
        raise
    if not rewrite_store.replaced:
        raise RocksDBTransformError(f"Spark's state rewriter never reached operator {rewrite_store.target}")
    keep_partition_zero(location, set(zero))
    _commit(location, batch_id, written, _checkpoint_ids(jvm, ids))
    return written


def _checkpoint_ids(jvm: Any, ids: Any) -> dict[str, list[list[str]]] | None:
    """Spark's ``Option[Map[operator, partition -> store -> id]]`` as the commit log's JSON (format version 2)."""
    if not ids.isDefined():
        return None
    found = jvm.scala.jdk.javaapi.CollectionConverters.asJava(ids.get())
    return {str(e.getKey()): [list(stores) for stores in e.getValue()] for e in found.entrySet()}


def _commit(location: Path, batch_id: int, written: int, ids: dict[str, list[list[str]]] | None) -> None:
    """Batch ``written``'s commit: batch ``batch_id``'s, with the new state's checkpoint ids where it has them."""
    header, _, body = (location / "commits" / str(batch_id)).read_text(encoding="utf-8").partition("\n")
    entry = json.loads(body)
    entry.pop("stateUniqueIds", None)  # batch N's ids name its state, not the rewritten one
    if ids is not None:
        entry["stateUniqueIds"] = ids
    fresh = location / "commits" / f".{written}.tmp"
    fresh.write_text(f"{header}\n{json.dumps(entry, separators=(',', ':'))}", encoding="utf-8")
    fresh.replace(location / "commits" / str(written))
