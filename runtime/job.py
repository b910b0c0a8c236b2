"""Entry point for ``spark-submit runtime/job.py [options]``.

spark-submit runs this file as a script, which puts ``runtime/`` itself first on ``sys.path``. That entry
is replaced by the folder holding the ``runtime`` package, so our modules are imported only as
``runtime.*`` and can never shadow a module of the user's or of the standard library.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
if os.path.isdir(os.path.join(os.path.dirname(_here), "runtime")):
    sys.path.insert(0, os.path.dirname(_here))

from runtime.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
