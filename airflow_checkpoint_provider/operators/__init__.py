"""Operators: run a checkpointed job, restore it, take savepoints, rescale or transform state, stop it, enforce
retention."""

from airflow_checkpoint_provider.operators.rescale import RescaleOperator
from airflow_checkpoint_provider.operators.retention import CheckpointRetentionOperator
from airflow_checkpoint_provider.operators.savepoint import SavepointOperator
from airflow_checkpoint_provider.operators.stopping import StopStreamingJobOperator
from airflow_checkpoint_provider.operators.streaming_job import (
    CheckpointedStreamingJobOperator,
    RestoreFromCheckpointOperator,
)
from airflow_checkpoint_provider.operators.transform import TransformStateOperator

__all__ = [
    "CheckpointedStreamingJobOperator",
    "CheckpointRetentionOperator",
    "RescaleOperator",
    "RestoreFromCheckpointOperator",
    "SavepointOperator",
    "StopStreamingJobOperator",
    "TransformStateOperator",
]
