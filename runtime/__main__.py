"""``python -m spark_checkpoint_runtime [options]``: run a job with a local Spark (or spark-submit's)."""

import sys

from spark_checkpoint_runtime.cli import main

sys.exit(main())
