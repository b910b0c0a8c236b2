"""``_metadata``: the JSON that makes a folder a completed checkpoint or savepoint, and what it lists."""

from __future__ import annotations

import gzip
import json
import posixpath
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import fsspec

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError, DamagedCheckpoint, UnsupportedFormatVersion
from spark_checkpoint_runtime.layout.lineage import Lineage, StagedOutput
from spark_checkpoint_runtime.layout.names import METADATA_FILE, safe_relative_path, validate_job_name
from spark_checkpoint_runtime.layout.untrusted import UntrustedJson, int_field, parse_json_object, read_at_most

FORMAT_VERSION = 1
# Version 2 adds file entries stored as a range of a segment object (``offset``): a runtime that reads only
# version 1 would take the whole segment for the file, so such a _metadata says 2 and older runtimes refuse it.
# _metadata without segments stays version 1, readable by every runtime.
SEGMENTS_FORMAT_VERSION = 2
# Version 3 is version 2 stored gzip-compressed: a _metadata above COMPRESS_ABOVE_BYTES (a job of thousands of
# partitions lists tens of thousands of files; the JSON compresses about twentyfold). Readers tell it by gzip's
# magic bytes; a runtime that reads only versions 1 and 2 finds no JSON there and refuses the checkpoint as
# damaged, never restoring from something else in silence. Smaller _metadata stays plain JSON, readable by eye.
COMPRESSED_FORMAT_VERSION = 3
READABLE_FORMAT_VERSIONS = (FORMAT_VERSION, SEGMENTS_FORMAT_VERSION, COMPRESSED_FORMAT_VERSION)
COMPRESS_ABOVE_BYTES = 256 * 1024
COMPRESSION_LEVEL = 6
_GZIP_MAGIC = b"\x1f\x8b"


KINDS = ("checkpoint", "savepoint")


# A _metadata file is small (a list of files); anything bigger is not one of ours.
MAX_METADATA_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class FileEntry:
    """One file a snapshot needs.

    ``path`` is where it is stored, relative to the job folder (checkpoints) or the savepoint folder.
    ``target`` is where it goes in Spark's working checkpoint folder on restore. With ``offset``, ``path`` is
    a segment object that holds many small files (file merging) and the file is its ``size`` bytes from
    ``offset`` on.
    """

    path: str
    target: str
    size: int
    shared: bool
    offset: int | None = None

    @property
    def end(self) -> int:
        """The stored object's size this entry needs at least (the whole file, or up to its range's end)."""
        return (self.offset or 0) + self.size


@dataclass
class CheckpointMetadata:
    """The content of one ``_metadata`` file (checkpoint or savepoint)."""

    id: int
    kind: str
    job_name: str
    run_id: str
    batch_id: int
    trigger_timestamp_ms: int
    completion_timestamp_ms: int
    checkpointing_mode: str
    files: list[FileEntry]
    state_bytes: int
    bytes_written: int
    durations_ms: dict[str, int] = field(default_factory=dict)
    source_offsets: list[Any] = field(default_factory=list)
    restored_from: dict[str, Any] | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    spark_version: str | None = None
    # Which history this snapshot belongs to, and which staged sink output its completion publishes (see
    # ``layout.lineage``). JSON-shaped here; ``history`` and ``staged`` are the typed views.
    lineage: list[list[int]] | None = None
    staged_output: dict[str, Any] | None = None
    format_version: int = FORMAT_VERSION

    @property
    def history(self) -> Lineage:
        """The checkpoint ids of this snapshot's history (``[1, id]`` for ``_metadata`` without lineage)."""
        return Lineage.parse(self.lineage, self.id)

    @property
    def staged(self) -> StagedOutput | None:
        """The staged sink output this snapshot's completion publishes, if any."""
        return StagedOutput.parse(self.staged_output)

    @property
    def total_bytes(self) -> int:
        """Bytes of every file the snapshot needs."""
        return sum(f.size for f in self.files)

    def _data(self) -> dict[str, Any]:
        # Not dataclasses.asdict, which deep-copies every value: at 200 partitions that was most of the time a
        # checkpoint took to write its _metadata. Only ``files`` needs converting; the rest is JSON already.
        data = {name: getattr(self, name) for name in _METADATA_FIELDS}
        data["files"] = [_entry_data(entry) for entry in self.files]
        data["total_bytes"] = self.total_bytes
        segmented = any(f.offset is not None for f in self.files)
        data["format_version"] = SEGMENTS_FORMAT_VERSION if segmented else FORMAT_VERSION
        return data

    def to_json(self) -> str:
        """The JSON (indented for reading): format version 1, or 2 once a file is a range of a segment."""
        return json.dumps(self._data(), indent=1, sort_keys=True)

    def to_bytes(self) -> bytes:
        """What ``_metadata`` holds: the JSON, or above ``COMPRESS_ABOVE_BYTES`` compact JSON gzip-compressed
        as format version 3 (deterministic bytes: no timestamp in the gzip header)."""
        data = self._data()
        compressed = {**data, "format_version": COMPRESSED_FORMAT_VERSION}
        compact = json.dumps(compressed, sort_keys=True, separators=(",", ":")).encode("utf-8")
        # The indented JSON is never shorter than the compact one (the versions are one digit each): a large
        # _metadata is compressed without building the indented text first.
        if len(compact) <= COMPRESS_ABOVE_BYTES:
            text = json.dumps(data, indent=1, sort_keys=True).encode("utf-8")
            if len(text) <= COMPRESS_ABOVE_BYTES:
                return text
        return gzip.compress(compact, compresslevel=COMPRESSION_LEVEL, mtime=0)

    def summary(self) -> dict[str, Any]:
        """A small JSON-able description (for logs, XCom and listings)."""
        return {
            "checkpoint_id": self.id,
            "kind": self.kind,
            "job_name": self.job_name,
            "run_id": self.run_id,
            "batch_id": self.batch_id,
            "completion_timestamp_ms": self.completion_timestamp_ms,
            "duration_ms": self.durations_ms.get("total"),
            "state_bytes": self.state_bytes,
            "bytes_written": self.bytes_written,
            "total_bytes": self.total_bytes,
            "file_count": len(self.files),
            "restored_from": self.restored_from,
            "lineage": self.history.describe(),
        }

    @classmethod
    def from_json(cls, text: str | bytes, *, location: str) -> CheckpointMetadata:
        """Parse and check ``_metadata`` (plain or gzip-compressed JSON); raise ``DamagedCheckpoint`` saying
        what is wrong."""
        try:
            data = metadata_object(text)
        except UntrustedJson as exc:
            raise DamagedCheckpoint(location, f"{exc} (truncated or not ours?)") from None
        version = data.get("format_version")
        compressed = isinstance(text, bytes) and text.startswith(_GZIP_MAGIC)
        if compressed != (version == COMPRESSED_FORMAT_VERSION) and version in READABLE_FORMAT_VERSIONS:
            raise DamagedCheckpoint(
                location, f"_metadata says format version {version} but is {'' if compressed else 'not '}compressed"
            )
        if version not in READABLE_FORMAT_VERSIONS:
            raise UnsupportedFormatVersion(
                location,
                f"_metadata has format version {version!r}; this runtime reads versions "
                f"{', '.join(map(str, READABLE_FORMAT_VERSIONS))} (a newer runtime wrote it? restore with that one)",
            )
        try:
            files = [
                FileEntry(
                    path=safe_relative_path(f["path"], context=location),
                    target=safe_relative_path(f["target"], context=location),
                    size=_non_negative_int(f["size"]),
                    shared=bool(f["shared"]),
                    offset=_non_negative_int(f["offset"])
                    if version >= SEGMENTS_FORMAT_VERSION and "offset" in f
                    else None,
                )
                for f in data["files"]
            ]
            meta = cls(
                id=_non_negative_int(data["id"]),
                kind=str(data["kind"]),
                job_name=validate_job_name(data["job_name"]),
                run_id=str(data["run_id"]),
                batch_id=int_field(data, "batch_id"),
                trigger_timestamp_ms=int_field(data, "trigger_timestamp_ms"),
                completion_timestamp_ms=int_field(data, "completion_timestamp_ms"),
                checkpointing_mode=str(data["checkpointing_mode"]),
                files=files,
                state_bytes=_non_negative_int(data["state_bytes"]),
                bytes_written=_non_negative_int(data["bytes_written"]),
                durations_ms=_durations(data.get("durations_ms")),
                source_offsets=_typed(data.get("source_offsets"), list, "source_offsets"),
                restored_from=_typed(data.get("restored_from"), dict, "restored_from", default=None),
                fingerprint=_typed(data.get("fingerprint"), dict, "fingerprint"),
                spark_version=_typed(data.get("spark_version"), str, "spark_version", default=None),
                lineage=data.get("lineage"),
                staged_output=data.get("staged_output"),
                format_version=version,
            )
            # A damaged history or staged-output record makes the whole snapshot damaged: restoring from it
            # could publish the wrong output.
            Lineage.parse(meta.lineage, meta.id)
            StagedOutput.parse(meta.staged_output)
        except CheckpointFormatError as exc:
            raise DamagedCheckpoint(location, str(exc)) from None
        except (KeyError, TypeError, ValueError) as exc:
            raise DamagedCheckpoint(location, f"_metadata is missing or has a bad field: {exc!r}") from None
        if meta.kind not in KINDS:
            raise DamagedCheckpoint(location, f"_metadata has unknown kind {meta.kind!r}")
        return meta


_METADATA_FIELDS = tuple(f.name for f in fields(CheckpointMetadata))
_ENTRY_FIELDS = tuple(f.name for f in fields(FileEntry))


def _entry_data(entry: FileEntry) -> dict[str, Any]:
    """One ``files`` item of the JSON: the entry's fields, ``offset`` only for a range of a segment."""
    data = {name: getattr(entry, name) for name in _ENTRY_FIELDS}
    if data["offset"] is None:
        del data["offset"]
    return data


def metadata_object(raw: str | bytes) -> dict[str, Any]:
    """``_metadata``'s JSON object, plain or gzip-compressed; ``UntrustedJson`` when it is neither, or when it
    unpacks to more than ``MAX_METADATA_BYTES`` (a small file may unpack to gigabytes)."""
    if isinstance(raw, bytes) and raw.startswith(_GZIP_MAGIC):
        inflater = zlib.decompressobj(wbits=31)  # a gzip header and trailer
        try:
            raw = inflater.decompress(raw, MAX_METADATA_BYTES + 1)
        except zlib.error as exc:
            raise UntrustedJson(f"_metadata is not valid gzip: {exc}") from None
        if len(raw) > MAX_METADATA_BYTES:
            raise UntrustedJson(f"_metadata unpacks to more than any we write (more than {MAX_METADATA_BYTES} bytes)")
        if not inflater.eof:
            raise UntrustedJson("_metadata's gzip stream ends early")
    return parse_json_object(raw, what="_metadata")


def read_metadata(fs: fsspec.AbstractFileSystem, folder: str) -> CheckpointMetadata:
    """Read and parse ``<folder>/_metadata`` (no more than the largest we write, in one read);
    ``DamagedCheckpoint`` if missing or malformed. Every reader of ``_metadata`` comes through here."""
    path = posixpath.join(folder, METADATA_FILE)
    location = fs.unstrip_protocol(folder)
    try:
        raw = read_at_most(fs, path, MAX_METADATA_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        raise DamagedCheckpoint(location, "no _metadata (an incomplete checkpoint)") from None
    if len(raw) > MAX_METADATA_BYTES:
        raise DamagedCheckpoint(
            location, f"_metadata is larger than any we write (more than {MAX_METADATA_BYTES} bytes)"
        )
    return CheckpointMetadata.from_json(raw, location=location)


def _typed(value: Any, kind: type, key: str, default: Any = ...) -> Any:
    """``value`` if it is a ``kind`` (or missing: ``default``, else an empty ``kind``); ``ValueError`` otherwise."""
    if value is None:
        return kind() if default is ... else default
    if not isinstance(value, kind):
        raise ValueError(f"{key} must be a {kind.__name__}, not {type(value).__name__}")
    return value


def _durations(value: Any) -> dict[str, int]:
    durations = _typed(value, dict, "durations_ms")
    return {str(name): int_field(durations, name) for name in durations}


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def now_ms() -> int:
    """Wall-clock time in milliseconds, the unit of every timestamp in ``_metadata``."""
    return int(time.time() * 1000)


@dataclass(frozen=True)
class ValidCheckpoint:
    """A checkpoint or savepoint that passed validation, with where it lives.

    ``base`` is the folder its file paths are relative to: the job folder for a checkpoint, the savepoint
    folder itself for a savepoint (which is what makes savepoints relocatable).
    """

    metadata: CheckpointMetadata
    path: str  # the checkpoint or savepoint folder, in ``fs``
    fs: fsspec.AbstractFileSystem
    base: str
    # The sizes its shared files had in the listing that validated it (base-relative path to size; may be
    # empty). They never change, so a run that reuses them need not ask the store again.
    listed_sizes: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def file_path(self, entry: FileEntry) -> str:
        """Where one of the snapshot's files is stored."""
        return posixpath.join(self.base, safe_relative_path(entry.path, context=self.fs.unstrip_protocol(self.path)))

    @property
    def url(self) -> str:
        return self.fs.unstrip_protocol(self.path)


def referenced_files(metadatas: Iterable[CheckpointMetadata]) -> set[str]:
    """Job-relative paths of every shared file the given checkpoints reference."""
    return {f.path for meta in metadatas for f in meta.files if f.shared}


def entry_intact(entry: FileEntry, listing: dict[str, int]) -> bool:
    """Whether a listing (relative path to size) has the entry's file: its exact size, or for a range of a
    segment a segment long enough to hold it (other files of the segment may be longer gone from use)."""
    size = listing.get(entry.path)
    if size is None:
        return False
    return size >= entry.end if entry.offset is not None else size == entry.size


def missing_files(files: list[FileEntry], listing: dict[str, int]) -> str:
    """What of ``files`` a listing (relative path to size) lacks or has at another size; "" when nothing."""
    problems = []
    for entry in files:
        size = listing.get(entry.path)
        if size is None:
            problems.append(f"missing {entry.path}")
        elif not entry_intact(entry, listing):
            expected = f"at least {entry.end}" if entry.offset is not None else str(entry.size)
            problems.append(f"{entry.path} has {size} bytes, expected {expected}")
    if not problems:
        return ""
    shown = ", ".join(problems[:3])
    return shown + (f" and {len(problems) - 3} more" if len(problems) > 3 else "")
