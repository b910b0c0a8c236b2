"""Checkpoint duration and size over time, and state bytes per partition, drawn on the server as inline SVG
(no scripts, no external assets: the page works without internet)."""

from __future__ import annotations

from html import escape

from spark_checkpoint_runtime.durations import format_bytes, format_duration

WIDTH, HEIGHT, PAD = 720, 160, 40


def line_chart(title: str, points: list[tuple[int, float]], label) -> str:
    """An SVG line chart of ``(checkpoint id, value)``; ``label`` formats a value for the axis."""
    if not points:
        return (
            f'<svg role="img" aria-label="{escape(title)}" width="{WIDTH}" height="40"><text x="0" y="20">'
            f"{escape(title)}: no completed checkpoints</text></svg>"
        )
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    top = max(ys) or 1

    def at(x: float, y: float) -> str:
        px = PAD + (x - x0) / (x1 - x0) * (WIDTH - 2 * PAD)
        py = HEIGHT - PAD / 2 - y / top * (HEIGHT - PAD)
        return f"{px:.1f},{py:.1f}"

    line = " ".join(at(x, y) for x, y in points)
    dots = "".join(f'<circle cx="{at(x, y).split(",")[0]}" cy="{at(x, y).split(",")[1]}" r="2"/>' for x, y in points)
    return _chart(
        title,
        f"{title} (max {label(top)})",
        (f"chk-{x0}", f"chk-{max(xs)}"),
        f'<polyline fill="none" stroke="#2a6fb0" stroke-width="1.5" points="{line}"/><g fill="#2a6fb0">{dots}</g>',
    )


def _chart(label: str, heading: str, ends: tuple[str, str], body: str, *, css: str = "chart", data: str = "") -> str:
    """The frame every chart shares: the SVG element, its heading, the baseline and the labels at both ends.
    ``body`` is SVG already built from escaped values; ``data`` extra attributes."""
    return (
        f'<svg role="img" aria-label="{escape(label)}" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg" class="{css}"{data}>'
        f'<text x="{PAD}" y="14" font-size="12">{escape(heading)}</text>'
        f'<line x1="{PAD}" y1="{HEIGHT - PAD / 2}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD / 2}" stroke="#999"/>'
        f'<text x="{PAD}" y="{HEIGHT - 4}" font-size="10">{escape(ends[0])}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 4}" font-size="10" text-anchor="end">{escape(ends[1])}</text>'
        f"{body}</svg>"
    )


def history_charts(checkpoints: list[dict]) -> str:
    """Two charts over the shown checkpoints: duration and bytes written."""
    done = [c for c in checkpoints if c.get("completion_timestamp_ms")]
    durations = [(c["id"], (c.get("duration_ms") or 0) / 1000) for c in done]
    sizes = [(c["id"], c.get("bytes_written") or 0) for c in done]
    return line_chart("Checkpoint duration", durations, format_duration) + line_chart(
        "Bytes written per checkpoint", sizes, lambda v: format_bytes(int(v))
    )


def partition_charts(partitions: list[dict]) -> str:
    """One bar chart per stateful operator and store: the restore point's state bytes per partition, with the
    largest against the median (skew)."""
    if not partitions:
        return ""
    stores: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for part in partitions:
        stores.setdefault((part["operator"], part["store"]), []).append((part["partition"], part["bytes"]))
    return "".join(_bars(operator, store, sorted(bars)) for (operator, store), bars in sorted(stores.items()))


def _bars(operator: int, store: str, bars: list[tuple[int, int]]) -> str:
    sizes = sorted(size for _, size in bars)
    top, median = sizes[-1] or 1, sizes[len(sizes) // 2]
    skew = f"{sizes[-1] / median:.1f}x the median" if median else "the median is empty"
    title = f"State bytes per partition, operator {operator} ({store}): largest {format_bytes(sizes[-1])}, {skew}"
    width = (WIDTH - 2 * PAD) / len(bars)
    rects = "".join(
        f'<rect x="{PAD + i * width:.1f}" y="{HEIGHT - PAD / 2 - size / top * (HEIGHT - PAD):.1f}" '
        f'width="{max(width - 1, 1):.1f}" height="{size / top * (HEIGHT - PAD):.1f}">'
        f"<title>partition {partition}: {escape(format_bytes(size))}</title></rect>"
        for i, (partition, size) in enumerate(bars)
    )
    return _chart(
        title,
        title,
        (f"partition {bars[0][0]}", f"partition {bars[-1][0]}"),
        f'<g fill="#2a6fb0">{rects}</g>',
        css="chart partitions",
        data=f' data-operator="{operator}" data-store="{escape(store)}" data-partitions="{len(bars)}"',
    )
