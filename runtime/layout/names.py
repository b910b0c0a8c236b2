"""Names and paths inside a job folder: job names, ``chk-<N>``, keys, relative paths that cannot escape."""

from __future__ import annotations

import hashlib
import os
import posixpath
import re

from fsspec.core import split_protocol

from spark_checkpoint_runtime.layout.errors import CheckpointFormatError

METADATA_FILE = "_metadata"


CHECKPOINT_PREFIX = "chk-"


SHARED_DIR = "shared"
SEGMENTS_DIR = "_segments"  # shared/<run>/_segments/: segment objects of file merging (no Spark file is named so)


SAVEPOINTS_DIR = "savepoints"
SAVEPOINT_PREFIX = "savepoint-"  # savepoints/savepoint-<trigger id>/
SPARK_OFFSETS_DIR = "offsets"  # Spark's offset log, in every snapshot: a folder holding it is a snapshot's


CONTROL_DIR = "_control"


IDS_DIR = "_ids"  # the id record: one exclusively created file per reserved snapshot id (id_record.py)

REPORTS_DIR = "_reports"  # full reports of maintenance runs (retention), named by when and by whom


JOB_NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")


_CHECKPOINT_DIR = re.compile(r"^chk-(\d+)$")


def validate_job_name(name: str) -> str:
    """Return ``name`` if it is a usable job folder name: letters, digits, ``.``, ``_`` and ``-`` only."""
    if not isinstance(name, str) or not name:
        raise CheckpointFormatError("job name is empty; pass --job-name with letters, digits, '.', '_' or '-'")
    if not JOB_NAME_PATTERN.match(name) or name in (".", "..") or set(name) == {"."}:
        raise CheckpointFormatError(
            f"job name {name!r} is not allowed: use only letters, digits, '.', '_' and '-' "
            "(no '/', no '..'); it becomes a folder name under the checkpoint root"
        )
    return name


def checkpoint_dir_name(checkpoint_id: int) -> str:
    """Folder name of checkpoint ``checkpoint_id`` (``chk-<N>``)."""
    return f"{CHECKPOINT_PREFIX}{int(checkpoint_id)}"


def parse_checkpoint_dir_name(name: str) -> int | None:
    """The id in a ``chk-<N>`` folder name, or None if ``name`` is not one."""
    match = _CHECKPOINT_DIR.match(name)
    return int(match.group(1)) if match else None


def safe_relative_path(path: str, *, context: str) -> str:
    """Return ``path`` normalized if it is relative and stays inside its base folder, else raise."""
    if not isinstance(path, str) or not path:
        raise CheckpointFormatError(f"{context}: empty file path")
    if path.startswith("/") or "\\" in path or "://" in path:
        raise CheckpointFormatError(f"{context}: file path {path!r} must be relative")
    normalized = posixpath.normpath(path)
    if normalized == ".." or normalized.startswith("../") or normalized == ".":
        raise CheckpointFormatError(f"{context}: file path {path!r} leaves its folder")
    return normalized


MAX_KEY_LENGTH = 200


def validate_key(key: str, what: str) -> str:
    """Trigger ids and run keys become file names: the job-name rules apply, at most ``MAX_KEY_LENGTH``."""
    if not isinstance(key, str) or not JOB_NAME_PATTERN.match(key) or set(key) == {"."}:
        raise CheckpointFormatError(f"{what} {key!r} is not allowed: use only letters, digits, '.', '_' and '-'")
    if len(key) > MAX_KEY_LENGTH:
        raise CheckpointFormatError(f"{what} {key[:40]!r}... is {len(key)} characters; at most {MAX_KEY_LENGTH}")
    return key


def key_from(text: str) -> str:
    """A valid trigger id or run key made from any text (Airflow's dag, task and run ids).

    Characters outside the key rules become ``-``; a result longer than ``MAX_KEY_LENGTH`` keeps its start and
    ends with a hash of the whole text, so two long ids that share a prefix never map to one key.
    """
    key = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".") or "key"
    if len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return f"{key[: MAX_KEY_LENGTH - len(digest) - 1]}-{digest}"


def normalized_location(location: str) -> str:
    """``protocol://normalized/path`` for comparing locations (``..`` resolved, plain paths are ``file``)."""
    protocol, path = split_protocol(location.strip())
    protocol = protocol or "file"
    if protocol == "file":
        path = os.path.abspath(path)
    return f"{protocol}://{posixpath.normpath(path)}"


def relative_to(path: str, base: str) -> str:
    """``path`` relative to ``base``, for paths a listing of ``base`` returned.

    A prefix cut, not ``posixpath.relpath``: relpath normalises both paths on every call, which was a
    third of retention's planning time over 130,000 files.
    """
    prefix = base.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else posixpath.relpath(path, base)


def is_inside(path: str, folder: str) -> bool:
    path, folder = posixpath.normpath(path), posixpath.normpath(folder)
    return path == folder or path.startswith(folder.rstrip("/") + "/")
