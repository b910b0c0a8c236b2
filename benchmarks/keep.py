"""Put a rerun's JSON in place without losing the run it supersedes.

    .venv/bin/python -m benchmarks.keep /tmp/local.json benchmarks/throughput_200_local.json

The committed JSON moves to ``benchmarks/earlier/<name>@<commit>.json`` (its provenance's commit) and the new
one takes its place. Every run stays in the repository, so a goal judged from paired runs can pool every run of
one runtime (``benchmarks.findings.pooled_with``) rather than see only the last, and a rerun that happened to
miss, or to meet, a goal stays beside the others.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from benchmarks.findings import EARLIER


def _provenance(path: Path) -> dict:
    try:
        found = json.loads(path.read_text()).get("provenance")
    except (OSError, ValueError) as error:
        raise SystemExit(f"benchmarks.keep: cannot read {path}: {error}") from None
    if not found or not found.get("commit"):
        raise SystemExit(f"benchmarks.keep: {path} records no provenance commit; rerun it with the current benchmarks")
    return found


def set_aside(target: Path) -> Path:
    """Copy ``target`` to ``earlier/<name>@<commit>.json`` beside it (``.2``, ``.3``… for another run of the
    same commit) and return where it is kept; a run already kept there is not copied again."""
    commit = _provenance(target)["commit"]
    folder = target.parent / EARLIER
    folder.mkdir(exist_ok=True)
    number = 1
    while True:
        kept = folder / f"{target.stem}@{commit}{'' if number == 1 else f'.{number}'}{target.suffix}"
        if not kept.exists():
            shutil.copyfile(target, kept)
            return kept
        if kept.read_bytes() == target.read_bytes():
            return kept
        number += 1


def keep(new: Path, target: Path) -> Path | None:
    """Set ``target`` (if any) aside under ``earlier/``, then copy ``new`` over it. Returns where the superseded
    run is kept."""
    if new.resolve() == target.resolve():
        raise SystemExit(f"benchmarks.keep: {new} is the committed file itself; write the rerun elsewhere first")
    _provenance(new)
    kept = set_aside(target) if target.exists() else None
    shutil.copyfile(new, target)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.keep", description=__doc__.splitlines()[0])
    parser.add_argument("new", type=Path, help="the rerun's JSON")
    parser.add_argument("target", type=Path, help="the committed JSON it replaces, under benchmarks/")
    args = parser.parse_args(argv)
    kept = keep(args.new, args.target)
    print(f"{args.target} ← {args.new}" + (f"; the run it replaced is now {kept}" if kept else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
