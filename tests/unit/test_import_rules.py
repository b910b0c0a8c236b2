"""Must-show 7: the runtime never imports Airflow; the format module and the provider never import pyspark.

Checked twice: statically over every module's imports, and by importing in a fresh interpreter that has
the forbidden package blocked.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO


def _imports(package: Path) -> dict[str, set[str]]:
    found = {}
    for path in package.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(REPO))] = names
    return found


def test_runtime_never_imports_airflow():
    offenders = {p: n for p, n in _imports(REPO / "runtime").items() if "airflow" in n}
    assert not offenders


def test_provider_never_imports_pyspark():
    offenders = {p: n for p, n in _imports(REPO / "airflow_checkpoint_provider").items() if "pyspark" in n}
    assert not offenders


_BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {blocked!r}:
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
import {module}
print('ok')
"""


@pytest.mark.parametrize(
    ("module", "blocked"),
    [
        ("spark_checkpoint_runtime.layout", {"pyspark", "airflow"}),
        ("spark_checkpoint_runtime.retention", {"pyspark", "airflow"}),
        ("spark_checkpoint_runtime.cli", {"airflow"}),
        ("spark_checkpoint_runtime.run.job", {"airflow"}),
        ("airflow_checkpoint_provider", {"pyspark"}),
    ],
)
def test_modules_import_with_the_forbidden_package_blocked(module, blocked):
    code = _BLOCK.format(blocked=sorted(blocked), module=module)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr
