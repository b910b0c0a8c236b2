"""A landing folder of JSON event files, as the example pipelines read them (used by demos and tests).

Each file is written under a hidden temporary name and renamed into place, so a streaming source never
sees half a file. Ids count up from ``first_id``; keys cycle through ``keys``.
"""

from __future__ import annotations

import json
from pathlib import Path


class Landing:
    """Writes event files ``{"id", "key", "value"}`` and remembers every row it wrote."""

    def __init__(self, path: Path, keys: int | list[str] = 5, first_id: int = 0):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.keys = [f"k{n}" for n in range(keys)] if isinstance(keys, int) else list(keys)
        self.next_id = first_id
        self.files = 0
        self.rows: list[dict] = []

    def add_file(self, rows: int = 10, keys: list[str] | None = None) -> Path:
        """One more file of ``rows`` events (keys from ``keys`` if given, else the folder's cycle)."""
        lines = []
        for n in range(rows):
            key = keys[n % len(keys)] if keys else self.keys[self.next_id % len(self.keys)]
            row = {"id": self.next_id, "key": key, "value": self.next_id % 7}
            self.rows.append(row)
            lines.append(json.dumps(row))
            self.next_id += 1
        final = self.path / f"events-{self.files:05d}.json"
        temporary = self.path / f".{final.name}.tmp"
        temporary.write_text("\n".join(lines) + "\n")
        temporary.rename(final)
        self.files += 1
        return final

    def add_files(self, count: int, rows: int = 10) -> None:
        for _ in range(count):
            self.add_file(rows)

    def counts_by_key(self) -> dict[str, int]:
        """How many events each key has: what a correct running count ends at."""
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row["key"]] = counts.get(row["key"], 0) + 1
        return counts
