"""Hooks: checkpoint storage access and submitting the runtime."""

from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook
from airflow_checkpoint_provider.hooks.streaming_job import StreamingJobHook

__all__ = ["CheckpointStorageHook", "StreamingJobHook"]
