"""The Airflow side of airflow-checkpoint-provider. Never imports pyspark.

- ``operators``: ``CheckpointedStreamingJobOperator``, ``RestoreFromCheckpointOperator``,
  ``CheckpointRetentionOperator``
- ``sensors``: ``CheckpointSensor`` (deferrable), ``CheckpointHealthSensor``
- ``hooks``: ``CheckpointStorageHook`` (connection type ``checkpoint_storage``), ``StreamingJobHook``
- ``triggers``: ``CheckpointTrigger``

Everything about the on-disk format comes from the runtime's ``spark_checkpoint_runtime.layout``.
"""

from spark_checkpoint_runtime import __version__

__all__ = ["__version__"]
