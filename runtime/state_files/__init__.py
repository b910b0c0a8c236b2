"""Which files of Spark's working folder a snapshot needs, per state store layout.

- ``selection``: the whole folder (metadata, logs, sources, state metadata, checksum sidecars);
- ``hdfs``: the HDFS-backed state store's delta/snapshot chains;
- ``rocksdb``: the RocksDB state store's zips, changelogs and SST files (checkpoint formats v1 and v2);
- ``errors``: why a capture could not select a consistent set.
"""

from spark_checkpoint_runtime.state_files.errors import CaptureError, CaptureRaced, UnsupportedStateStore
from spark_checkpoint_runtime.state_files.hdfs import MAX_DELTA_CHAIN
from spark_checkpoint_runtime.state_files.selection import (
    SelectedFile,
    read_batch_offsets,
    select_files,
    state_store_folder,
)

__all__ = [
    "MAX_DELTA_CHAIN",
    "CaptureError",
    "CaptureRaced",
    "SelectedFile",
    "UnsupportedStateStore",
    "read_batch_offsets",
    "select_files",
    "state_store_folder",
]
