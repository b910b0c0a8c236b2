"""One listing of a job folder, shared by the questions a run asks of the folder at once."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from spark_checkpoint_runtime.layout.names import SAVEPOINTS_DIR, parse_checkpoint_dir_name

if TYPE_CHECKING:
    from spark_checkpoint_runtime.layout.completed_checkpoints import CompletedCheckpoints


class JobListing:
    """What one listing of a job folder shows (``JobFolder.listing()``): its ``chk-<N>`` ids, ascending, and
    whether it has a ``savepoints/`` folder; ``newest_metadata_id`` looks ``_metadata`` up once, newest first.

    A caller that asks the folder several things together shares one listing between them: a run settling
    its plan (a newer checkpoint? a newer ``_metadata``? the next id?) takes it once it holds the job. On an
    object store every listing is a request, and listing a folder that does not exist costs two.
    """

    def __init__(self, checkpoints: CompletedCheckpoints, names: list[str]):
        self._checkpoints = checkpoints
        parsed = (parse_checkpoint_dir_name(name) for name in names)
        self.checkpoint_ids: list[int] = sorted(i for i in parsed if i is not None)
        self.has_savepoints = SAVEPOINTS_DIR in names

    @cached_property
    def newest_metadata_id(self) -> int | None:
        """The newest listed ``chk-<N>`` that has a ``_metadata`` file, parseable or not (None: none has)."""
        return self._checkpoints.newest_metadata_id(self.checkpoint_ids)
