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


def _commit(content: bytes, where: Path, what_to_do: str) -> str:
    try:
        found = json.loads(content).get("provenance")
    except ValueError as error:
        raise SystemExit(f"benchmarks.keep: {where} is not a benchmark's JSON ({error}); {what_to_do}") from None
    if not found or not found.get("commit"):
        raise SystemExit(f"benchmarks.keep: {where} records no provenance commit; {what_to_do}")
    return found["commit"]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise SystemExit(f"benchmarks.keep: cannot read {path}: {error}") from None


def set_aside(target: Path, content: bytes | None = None) -> Path:
    """Keep ``target``'s run (or, given ``content``, the run it held before being rewritten) as
    ``earlier/<name>@<commit>.json`` beside it (``.2``, ``.3``… for another run of the same commit), and return
    where it is kept; a run already kept there is not copied again."""
    content = _read(target) if content is None else content
    commit = _commit(content, target, "move it aside by hand (git history keeps it) and run again")
    folder = target.parent / EARLIER
    folder.mkdir(exist_ok=True)
    number = 1
    while True:
        kept = folder / f"{target.stem}@{commit}{'' if number == 1 else f'.{number}'}{target.suffix}"
        if not kept.exists():
            kept.write_bytes(content)
            return kept
        if kept.read_bytes() == content:
            return kept
        number += 1


def keep(new: Path, target: Path) -> Path | None:
    """Set ``target``'s run (if any) aside under ``earlier/``, then copy ``new`` over it. Returns where the
    superseded run is kept."""
    if new.resolve() == target.resolve():
        raise SystemExit(f"benchmarks.keep: {new} is the committed file itself; write the rerun elsewhere first")
    _commit(_read(new), new, "rerun it with the current benchmarks, which record it")
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
