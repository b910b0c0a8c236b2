"""Reliability figures the suite collects as it runs; printed at the end and written to ``.cache/``.

The reliability table of docs/reliability.md comes from this output (``scripts/test.sh`` prints it last). Each pytest
process (xdist worker) saves its counts as a part; the process that prints the summary adds them up.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

FIGURES: Counter[str] = Counter()
KILLS_BY_POINT: Counter[str] = Counter()
OUTPUT = Path(__file__).resolve().parents[2] / ".cache" / "reliability-figures.json"
PARTS = OUTPUT.parent / "reliability-figures.parts"


def record_kill(point: str, group: str | None = None) -> None:
    """One SIGKILL survived at ``point``; ``group`` also counts it for a family of chains ("rewind chains")."""
    FIGURES["kills survived"] += 1
    KILLS_BY_POINT[point] += 1
    if group:
        FIGURES[f"kills in the {group}"] += 1


def record_rows(checked: int, lost: int, duplicated: int, mode: str) -> None:
    FIGURES["rows checked"] += checked
    FIGURES["rows lost"] += lost
    FIGURES[f"rows duplicated ({mode})"] += duplicated


def add(name: str, count: int = 1) -> None:
    FIGURES[name] += count


def clear_parts() -> None:
    """At the start of a run: forget parts of earlier runs."""
    if PARTS.exists():
        for part in PARTS.glob("*.json"):
            part.unlink()


def save_part(name: str) -> None:
    if FIGURES:
        PARTS.mkdir(parents=True, exist_ok=True)
        (PARTS / f"{name}.json").write_text(json.dumps({"figures": FIGURES, "kills_by_point": KILLS_BY_POINT}))


def report() -> list[str]:
    """The table's lines from every part of this run (empty if no reliability test ran); writes the JSON."""
    figures: Counter[str] = Counter()
    kills: Counter[str] = Counter()
    for part in sorted(PARTS.glob("*.json")) if PARTS.exists() else []:
        data = json.loads(part.read_text())
        figures.update(data["figures"])
        kills.update(data["kills_by_point"])
    if not figures:
        return []
    OUTPUT.write_text(json.dumps({"figures": dict(figures), "kills_by_point": dict(kills)}, indent=2))
    lines = ["| figure | count |", "|---|---|"]
    lines += [f"| {name} | {figures[name]} |" for name in sorted(figures)]
    if kills:
        lines.append("| kills by point | " + ", ".join(f"{p} {n}" for p, n in sorted(kills.items())) + " |")
    return lines


PUBLISHED = OUTPUT.parents[1] / "benchmarks" / "reliability.json"
# A run of the default suite records these; a run of a few tests would publish a partial table.
EXPECTED = ("kills survived", "rows checked", "storage faults injected", "overlapping runs refused", "lease takeovers")


def publish(source: Path = OUTPUT) -> Path:
    """Copy a whole run's figures into ``benchmarks/reliability.json`` with where they were measured, for the
    reliability table of ``docs/reliability.md`` (``python -m benchmarks.report`` renders it)."""
    from benchmarks.provenance import write_result

    data = json.loads(source.read_text())
    missing = [name for name in EXPECTED if name not in data["figures"]]
    if missing:
        raise SystemExit(f"{source} lacks {', '.join(missing)}: publish the figures of a whole default run")
    write_result(PUBLISHED, {"command": "CI=true bash .ci/run", **data})
    return PUBLISHED


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.support.figures", description=__doc__.splitlines()[0])
    parser.add_argument("--publish", action="store_true", help="copy the last whole run's figures into benchmarks/")
    parser.add_argument("--source", type=Path, default=OUTPUT, help="the figures to publish (default: .cache/)")
    args = parser.parse_args()
    if not args.publish:
        parser.error("nothing to do: pass --publish")
    print(publish(args.source))
