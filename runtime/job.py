"""Entry point for ``spark-submit runtime/job.py [options]``.

spark-submit runs this file as a script, which puts its own folder first on ``sys.path``. That entry is
removed, so our modules can never shadow a module of the user's or of the standard library, and the folder
holding this file is imported as the package ``spark_checkpoint_runtime`` (its installed name; in a checkout
the folder is called ``runtime/``). The package that runs is always the one next to this file.
"""

import importlib.util
import os
import sys

PACKAGE = "spark_checkpoint_runtime"
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
if PACKAGE not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(_here, "__init__.py"), submodule_search_locations=[_here]
    )
    _package = importlib.util.module_from_spec(_spec)
    sys.modules[PACKAGE] = _package
    _spec.loader.exec_module(_package)

from spark_checkpoint_runtime.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
