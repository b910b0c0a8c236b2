"""``python -m runtime [options]``: run a job with a local Spark (or the one spark-submit configured)."""

import sys

from runtime.cli import main

sys.exit(main())
