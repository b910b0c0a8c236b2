"""Sensors: wait for a completed checkpoint; judge checkpoint health."""

from airflow_checkpoint_provider.sensors.checkpoint import CheckpointSensor
from airflow_checkpoint_provider.sensors.health import CheckpointHealthSensor

__all__ = ["CheckpointHealthSensor", "CheckpointSensor"]
