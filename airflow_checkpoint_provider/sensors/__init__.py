"""Sensors: wait for a completed checkpoint; judge checkpoint health, after a run or beside it."""

from airflow_checkpoint_provider.sensors.checkpoint import CheckpointSensor
from airflow_checkpoint_provider.sensors.health import CheckpointHealthSensor, RunningJobHealthSensor

__all__ = ["CheckpointHealthSensor", "CheckpointSensor", "RunningJobHealthSensor"]
