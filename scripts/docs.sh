#!/usr/bin/env bash
# The documentation site (MkDocs, Material theme), in a venv of its own (.venv-docs):
#   bash scripts/docs.sh          # build into site/ with --strict: a broken link or a missing page fails
#   bash scripts/docs.sh serve    # serve it on http://127.0.0.1:8000 and rebuild on every change
#   bash scripts/docs.sh install  # only create the venv
set -euo pipefail
export NO_MKDOCS_2_WARNING=1  # Material's banner about its successor, printed on every build
cd "$(dirname "$0")/.."
if [ ! -x .venv-docs/bin/mkdocs ]; then
    echo "installing mkdocs, mkdocs-material and mkdocstrings into .venv-docs (about a minute the first time)"
    python3 -m venv .venv-docs
    .venv-docs/bin/pip install -q "mkdocs>=1.6,<2" "mkdocs-material>=9.5,<10" "mkdocstrings[python]>=0.26"
fi
if [ "${1:-build}" = "install" ]; then
    exit 0  # the venv only (CI installs everything side by side first)
fi
# The runtime lives in runtime/ but is imported as spark_checkpoint_runtime: give the API reference that name.
mkdir -p .cache/docs-api
ln -sfn ../../runtime .cache/docs-api/spark_checkpoint_runtime
if [ "${1:-build}" = "serve" ]; then
    exec .venv-docs/bin/mkdocs serve --dev-addr 127.0.0.1:8000
fi
exec .venv-docs/bin/mkdocs build --strict --site-dir site
