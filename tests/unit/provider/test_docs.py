"""The README stays a front page, and the DAG it shows is one that Airflow loads.

The site itself is built with ``mkdocs build --strict`` in ``.ci/run`` (``scripts/docs.sh``): a broken link, a
page missing from the navigation or a snippet that names a missing file fails CI there.
"""

from __future__ import annotations

import re

from tests.support.helpers import REPO

README = REPO / "README.md"
FIRST_DAG = REPO / "docs" / "snippets" / "first_dag.py"


def test_the_readme_is_a_front_page_of_at_most_6_kb():
    assert len(README.read_bytes()) <= 6 * 1024, "move material into docs/ (the site), not the README"


def test_the_readme_shows_the_dag_the_docs_include():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert FIRST_DAG.read_text() in blocks, "README.md's DAG must be docs/snippets/first_dag.py, verbatim"


def test_the_readmes_dag_loads_in_airflow():
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(FIRST_DAG))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["orders"]
    assert set(dag.task_ids) == {"run_job", "confirm", "retention"}
    run, confirm = dag.get_task("run_job"), dag.get_task("confirm")
    assert run.job_name == "orders" and run.storage_conn_id == "checkpoint_s3" and run.retries == 2
    assert dag.get_task("retention").upstream_task_ids == {"confirm"}
    assert confirm.upstream_task_ids == {"run_job"}
