"""``compare.png``: for every test metric a panel with one column per configuration (in the table's order, labelled
by its rank): every seed's value as a point, the mean as a line, the 95% interval as a bar. Its size is bounded
whatever the runs' files hold: ``PANELS`` panels at most, titles and legend lines cut at ``TEXT_CHARS``.

Drawn with PIL (no plotting library: matplotlib is no dependency) and PIL's bundled font, so it looks the same
on every machine; a legend under the panels names each rank's configuration.
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

from PIL import Image, ImageDraw

from utils.compare.monitor import Monitor
from utils.compare.ranking import Row
from utils.visual.images import BACKGROUND, INK, font

TEXT, SMALL = 15, 13  # font sizes: titles, tick labels and legend
LEFT, RIGHT, TITLE, BELOW = 78, 24, 34, 30  # margins of a panel's plot area (pixels)
PLOT_HEIGHT = 210
MIN_COLUMN, MAX_COLUMN, MIN_WIDTH = 22, 96, 560
LINE_WIDTH = 1280  # panels side by side up to this width, then on the next line
LEGEND_LINES = 40  # more configurations than this: the rest are in compare.md, by rank
PANELS = 24  # more test metrics than this: the monitor and the first others drawn, every one in compare.csv
TEXT_CHARS = 160  # a title or legend line longer than this (a name from a run's files) is cut: the image stays small
GRID, FRAME, BEST = (225, 225, 225), (140, 140, 140), (255, 246, 214)
SEED, SEED_EDGE, INTERVAL = (86, 140, 200), (30, 70, 120), (214, 84, 40)


def nice_ticks(low: float, high: float, count: int = 5) -> List[float]:
    """About ``count`` round values (1, 2 or 5 times a power of ten apart) covering [low, high]."""
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(power * m for m in (1, 2, 5, 10) if power * m >= raw)
    first = math.ceil(low / step - 1e-9) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _tick_label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{value:.{decimals}f}"


def value_range(rows: Sequence[Row], metric: str) -> Tuple[float, float]:
    """The panel's y range: every seed and interval bound of ``metric``, with some room around them."""
    found = [v for row in rows for v in row.values(metric)]
    for row in rows:
        summary = row.stats.get(metric)
        if summary is not None and summary.ci_low is not None:
            found += [summary.ci_low, summary.ci_high]
    found = [v for v in found if math.isfinite(v)]
    if not found:
        return 0.0, 1.0
    low, high = min(found), max(found)
    pad = (high - low) * 0.08 or max(abs(low) * 0.05, 1e-3)
    return low - pad, high + pad


class Panel:
    """One metric's plot area on the canvas (its box's corner at ``origin``): maps values and columns to pixels."""

    def __init__(self, origin: Tuple[int, int], column: float, low: float, high: float) -> None:
        (self.x0, self.top), self.column, self.low, self.high = origin, column, low, high

    def x(self, index: float) -> float:
        """The centre of column ``index`` (0: rank 1)."""
        return self.x0 + LEFT + (index + 0.5) * self.column

    def y(self, value: float) -> float:
        share = (value - self.low) / (self.high - self.low)
        return self.top + TITLE + PLOT_HEIGHT * (1 - share)


def _axes(draw: ImageDraw.ImageDraw, panel: Panel, title: str, count: int) -> None:
    """Title, frame, grid lines and their values; rank 1's column shaded."""
    left, right = panel.x0 + LEFT, panel.x0 + LEFT + panel.column * count
    top, bottom = panel.top + TITLE, panel.top + TITLE + PLOT_HEIGHT
    draw.text((left, panel.top + 8), title, fill=INK, font=font(TEXT))
    draw.rectangle([left + 1, top + 1, left + panel.column - 1, bottom - 1], fill=BEST)
    ticks = nice_ticks(panel.low, panel.high)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 0.0
    for tick in ticks:
        y = panel.y(tick)
        draw.line([(left, y), (right, y)], fill=GRID)
        draw.text((left - 6, y), _tick_label(tick, step), fill=INK, font=font(SMALL), anchor="rm")
    draw.rectangle([left, top, right, bottom], outline=FRAME)


def _column(draw: ImageDraw.ImageDraw, panel: Panel, row: Row, metric: str, index: int) -> None:
    """One configuration: its seeds' points left of the centre, its interval bar right of it, its mean across."""
    center, width = panel.x(index), panel.column
    summary = row.stats.get(metric)
    if summary is None:
        return
    bar = center + width * 0.14
    if summary.ci_low is not None and math.isfinite(summary.ci_low) and math.isfinite(summary.ci_high):
        low, high, cap = panel.y(summary.ci_low), panel.y(summary.ci_high), max(2.0, width * 0.08)
        draw.line([(bar, low), (bar, high)], fill=INTERVAL, width=3)
        for y in (low, high):
            draw.line([(bar - cap, y), (bar + cap, y)], fill=INTERVAL, width=2)
    values = [v for v in row.values(metric) if math.isfinite(v)]
    spread = min(width * 0.18, 4.0 * (len(values) - 1))  # seeds side by side, so equal values stay visible
    for i, value in enumerate(values):
        x = center - width * 0.14 + (spread * i / (len(values) - 1) - spread / 2 if len(values) > 1 else 0.0)
        y = panel.y(value)
        draw.ellipse([x - 3.5, y - 3.5, x + 3.5, y + 3.5], fill=SEED, outline=SEED_EDGE)
    if math.isfinite(summary.mean):
        y, half = panel.y(summary.mean), width * 0.3
        draw.line([(center - half, y), (center + half, y)], fill=INK, width=2)


def _rank_labels(draw: ImageDraw.ImageDraw, panel: Panel, count: int) -> None:
    """Each column's rank under the panel (every k-th where the numbers would touch)."""
    every = max(1, math.ceil((font(SMALL).getlength(str(count)) + 6) / panel.column))
    y = panel.top + TITLE + PLOT_HEIGHT + 6
    for i in range(0, count, every):
        draw.text((panel.x(i), y), str(i + 1), fill=INK, font=font(SMALL), anchor="mt")


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 3] + "..."


def drawn_metrics(metrics: Sequence[str], monitor: Monitor) -> List[str]:
    """The metrics that get a panel: all of them up to ``PANELS``, else the monitor and the first others."""
    if len(metrics) <= PANELS:
        return list(metrics)
    first = [monitor.name] if monitor.name in metrics else []
    return first + [metric for metric in metrics if metric != monitor.name][: PANELS - len(first)]


def legend_lines(rows: Sequence[Row], incomplete: int, undrawn: int = 0) -> List[str]:
    """The legend under the panels: what the marks are, then rank -> configuration."""
    lines = ["points: seeds   black line: mean   red bar: 95% Student-t interval of the mean   x: rank (compare.md)"]
    lines += [
        _cut(f"{rank}: {row.configuration.label()} (n={row.configuration.n})") for rank, row in enumerate(rows, 1)
    ]
    if len(rows) > LEGEND_LINES:
        lines = lines[: LEGEND_LINES + 1] + [f"ranks {LEGEND_LINES + 1}-{len(rows)}: see compare.md"]
    if undrawn:
        lines.append(f"{undrawn} more test metric(s) without a panel: see compare.csv")
    if incomplete:
        lines.append(f"{incomplete} incomplete run(s) without a test row: not shown")
    return lines


def draw_figure(rows: Sequence[Row], metrics: Sequence[str], monitor: Monitor, incomplete: int) -> Image.Image:
    """The comparison's figure: one panel per test metric (side by side while they fit; ``PANELS`` at most), the
    legend below."""
    undrawn = len(metrics)
    metrics = drawn_metrics(metrics, monitor)
    undrawn -= len(metrics)
    count = max(len(rows), 1)
    column = min(MAX_COLUMN, max(MIN_COLUMN, 640 / count))
    titles = [
        _cut(f"test {metric}") + (f" (eval.monitor: {monitor.better()})" if metric == monitor.name else "")
        for metric in metrics
    ]
    # a panel is as wide as its title at least (a title never reaches the next panel), and its columns fill it
    title_width = max((font(TEXT).getlength(title) for title in titles), default=0)
    column = max(column, (title_width + 16 - RIGHT) / count)
    box_width = int(LEFT + max(column * count + RIGHT, title_width + 16))
    box_height = TITLE + PLOT_HEIGHT + BELOW
    per_line = max(1, min(len(metrics), LINE_WIDTH // box_width))
    lines = math.ceil(len(metrics) / per_line) if metrics else 1
    legend = legend_lines(rows, incomplete, undrawn)
    text_width = max((font(SMALL).getlength(line) for line in legend), default=0)
    width = int(max(MIN_WIDTH, box_width * per_line, text_width + 2 * 12))
    height = box_height * lines + 12 + len(legend) * (SMALL + 5) + 12
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for index, (metric, title) in enumerate(zip(metrics, titles)):
        origin = ((index % per_line) * box_width, (index // per_line) * box_height)
        panel = Panel(origin, column, *value_range(rows, metric))
        _axes(draw, panel, title, count)
        for i, row in enumerate(rows):
            _column(draw, panel, row, metric, i)
        _rank_labels(draw, panel, len(rows))
    y = box_height * lines + 12
    for line in legend:
        draw.text((12, y), line, fill=INK, font=font(SMALL))
        y += SMALL + 5
    return image
