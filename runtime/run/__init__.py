"""One run of a checkpointed streaming job, one module per step of its life.

The order matters and is the promise to users (``job.StreamingJob.run`` reads top to bottom in it):

1. ``session``: start Spark and load the user's pipeline;
2. ``plan``: resolve the restore point and check compatibility (reads only: bad input leaves the root
   untouched), then, holding the job's lease (``fence``), settle what the run continues: its history and
   the first id it may use;
3. ``output``: build a fresh working folder from the snapshot; a rewind (an older checkpoint, a savepoint)
   first writes a checkpoint of its own above every id in sight, so "latest" follows the new history; then
   recover the sink: publish what the restored snapshot names, abort other staged output, set aside
   published output outside the restored history;
4. ``query_loop``: run the query; the coordinator checkpoints at batch boundaries; sinks publish per the mode
   (``output.Publisher``); ``control_requests`` answers savepoint and stop requests;
5. ``finish``: on finish or stop request, stop between batches, take a final checkpoint, commit, apply the
   externalized-retention policy and report.

``state.RunState`` is what the parts share (staged batches, stop flags, rows); ``fence.RunFence`` owns every
lease check.
"""

from spark_checkpoint_runtime.run.job import StreamingJob

__all__ = ["StreamingJob"]
