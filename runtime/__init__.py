"""The Spark side of airflow-checkpoint-provider: Flink-style checkpoints for Structured Streaming.

Never imports Airflow. ``runtime.layout`` (the on-disk format) needs only fsspec; the rest needs pyspark.
"""

__version__ = "0.1.0"
