"""The Spark side of airflow-checkpoint-provider: Flink-style checkpoints for Structured Streaming.

Installed as ``spark_checkpoint_runtime`` (the repository folder is ``runtime/``). Never imports Airflow.
``spark_checkpoint_runtime.layout`` (the on-disk format) needs only fsspec; the rest needs pyspark.
"""

__version__ = "0.1.0"
