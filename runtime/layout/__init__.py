"""The on-disk checkpoint format: the contract between the runtime and the Airflow provider.

This package is the only code that knows paths under the checkpoint root and the shape of ``_metadata``.
It needs only the standard library and fsspec, so the provider imports it without pyspark.

Layout of one job (``<root>/<job>/``)::

    chk-<N>/_metadata     completed checkpoint N, written last and atomically
    chk-<N>/...           files owned by checkpoint N alone (offset/commit log entries, query metadata)
    shared/...            immutable files (state data, source logs) referenced by one or more checkpoints
    savepoints/...        self-contained savepoints, never deleted by checkpoint retention
    _control/...          requests from Airflow and the runtime's responses
    _ids/...              the id record: ids reserved (never used twice), whether a checkpoint ever completed

Every path inside ``_metadata`` is relative (to the job folder for a checkpoint), so a folder can be
validated without trusting it: a listed path that is absolute or climbs out with ``..`` makes the
checkpoint invalid.

One concept per module:

- ``names``: job names, ``chk-<N>`` folder names, keys, relative paths that cannot escape their folder;
- ``metadata``: ``_metadata`` (``CheckpointMetadata``, ``FileEntry``) and a validated snapshot;
- ``lineage``: which ids (and published output) belong to a history; the staged output a snapshot publishes;
- ``store``: opening a URL, exclusive create, metadata-first deletes;
- ``job_folder``: one job's folder (``JobFolder``), the entry point: paths, listing, deletes, the next id,
  resolving a restore location;
- ``job_listing``: one listing of a job folder (``JobFolder.listing()``), shared by the questions a run asks at once;
- ``completed_checkpoints``: its checkpoints (``JobFolder.checkpoints``): reading, validation, "latest",
  writing, discards;
- ``savepoints``: its savepoints (``JobFolder.savepoints``) and self-contained, relocatable savepoint folders;
- ``control``: requests from Airflow and the runtime's answers (``ControlChannel(job_folder)``);
- ``lease_files``: the files behind the job lease;
- ``id_record``: ``_ids/``, the durable record of every snapshot id reserved and of a first completed checkpoint;
- ``errors``: what goes wrong reading the format.

Everything is importable from ``spark_checkpoint_runtime.layout`` itself.
"""

from spark_checkpoint_runtime.layout.completed_checkpoints import (
    CompletedCheckpoints,
    find_completed_checkpoint,
)
from spark_checkpoint_runtime.layout.control import (
    HEARTBEAT_SECONDS,
    HEARTBEAT_STALE_SECONDS,
    TERMINAL_STATUSES,
    ControlChannel,
    ControlPoll,
    ControlRequest,
)
from spark_checkpoint_runtime.layout.errors import (
    CheckpointFormatError,
    DamagedCheckpoint,
    NoValidCheckpoint,
    UnsupportedFormatVersion,
)
from spark_checkpoint_runtime.layout.id_record import KEEP_RECORDS, IdRecord
from spark_checkpoint_runtime.layout.job_folder import (
    JobFolder,
)
from spark_checkpoint_runtime.layout.job_listing import JobListing
from spark_checkpoint_runtime.layout.lease_files import (
    LeaseFiles,
    LeaseListing,
)
from spark_checkpoint_runtime.layout.lineage import (
    Lineage,
    StagedOutput,
)
from spark_checkpoint_runtime.layout.metadata import (
    FORMAT_VERSION,
    KINDS,
    MAX_METADATA_BYTES,
    CheckpointMetadata,
    FileEntry,
    ValidCheckpoint,
    entry_intact,
    missing_files,
    now_ms,
    referenced_files,
)
from spark_checkpoint_runtime.layout.names import (
    CHECKPOINT_PREFIX,
    CONTROL_DIR,
    METADATA_FILE,
    SAVEPOINTS_DIR,
    SHARED_DIR,
    checkpoint_dir_name,
    key_from,
    parse_checkpoint_dir_name,
    relative_to,
    safe_relative_path,
    validate_job_name,
    validate_key,
)
from spark_checkpoint_runtime.layout.savepoints import (
    SavepointFolder,
    Savepoints,
)
from spark_checkpoint_runtime.layout.store import (
    PendingUpload,
    SnapshotExists,
    StoreNotExclusive,
    create_exclusively,
    discard_folders,
    modified_time,
    open_url,
    probe_exclusive_create,
    write_metadata_atomically,
)

__all__ = [
    "PendingUpload",
    "CHECKPOINT_PREFIX",
    "CONTROL_DIR",
    "CheckpointFormatError",
    "CheckpointMetadata",
    "CompletedCheckpoints",
    "IdRecord",
    "KEEP_RECORDS",
    "ControlChannel",
    "ControlPoll",
    "ControlRequest",
    "DamagedCheckpoint",
    "FORMAT_VERSION",
    "FileEntry",
    "HEARTBEAT_SECONDS",
    "HEARTBEAT_STALE_SECONDS",
    "JobFolder",
    "JobListing",
    "KINDS",
    "LeaseFiles",
    "Lineage",
    "LeaseListing",
    "MAX_METADATA_BYTES",
    "METADATA_FILE",
    "NoValidCheckpoint",
    "UnsupportedFormatVersion",
    "SAVEPOINTS_DIR",
    "SHARED_DIR",
    "SavepointFolder",
    "Savepoints",
    "SnapshotExists",
    "StagedOutput",
    "StoreNotExclusive",
    "TERMINAL_STATUSES",
    "ValidCheckpoint",
    "checkpoint_dir_name",
    "create_exclusively",
    "probe_exclusive_create",
    "discard_folders",
    "find_completed_checkpoint",
    "key_from",
    "entry_intact",
    "missing_files",
    "modified_time",
    "now_ms",
    "open_url",
    "parse_checkpoint_dir_name",
    "referenced_files",
    "relative_to",
    "safe_relative_path",
    "validate_job_name",
    "validate_key",
    "write_metadata_atomically",
]
