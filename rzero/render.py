"""Rendering, written once: Markdown tables, escaped HTML pages and tables, error-bar figures.

The evaluation results, the label-accuracy audit, the ablation comparison and the run report
all render through here, so a table or a figure looks and escapes the same everywhere.

Escaping is the default. Every value handed to `html_table` or `html_page` is escaped unless
it is `Html` (markup built here, or by a caller that escaped what it interpolated), so a
question, label or judge reply a model wrote can never become markup. Markdown cells have
their pipes and newlines escaped, so a cell is always one cell of one row.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# ---------------------------------------------------------------- Markdown


def markdown_cell(value: Any) -> str:
    """`value` as the text of one Markdown table cell: `|` escaped, newlines as spaces."""
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")


def markdown_table(
    header: Sequence[Any], rows: Iterable[Sequence[Any]], align: str | None = None
) -> str:
    """A GitHub-flavoured Markdown table, one line per row, ending in a newline.

    align: one letter per column, "l" (left, the default) or "r" (right, for numbers).
    Every cell goes through `markdown_cell`.
    """
    align = align or "l" * len(header)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(
            f"align={align!r}: need one of 'l' or 'r' per column ({len(header)} columns)"
        )

    def line(cells: Sequence[Any]) -> str:
        if len(cells) != len(header):
            raise ValueError(
                f"row {list(cells)!r} has {len(cells)} cells; the header has {len(header)}"
            )
        texts = (markdown_cell(c) for c in cells)
        return "|" + "|".join(f" {t} " if t else " " for t in texts) + "|"

    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    return "\n".join([line(header), rule, *(line(r) for r in rows)]) + "\n"


# ---------------------------------------------------------------- HTML


class Html(str):
    """Markup that `html_table` and `html_page` insert as it is (everything else is escaped).

    Make one only from constants and `escape(...)`d values.
    """


def escape(value: Any) -> Html:
    """`value` as HTML text: `<`, `>`, `&` and both quotes escaped; None is empty."""
    return Html(html.escape("" if value is None else str(value), quote=True))


def _fragment(value: Any) -> str:
    return value if isinstance(value, Html) else escape(value)


def html_table(
    header: Sequence[Any], rows: Iterable[Sequence[Any]], row_classes: Iterable[str] | None = None
) -> Html:
    """A `<table>`; each cell is escaped unless it is `Html`.

    row_classes: a CSS class per row (e.g. a verdict, to colour the row), or None.
    """
    head = "".join(f"<th>{_fragment(h)}</th>" for h in header)
    rows = list(rows)
    classes = list(row_classes) if row_classes is not None else [""] * len(rows)
    body = []
    for row, cls in zip(rows, classes, strict=True):
        cells = "".join(f"<td>{_fragment(c)}</td>" for c in row)
        body.append(f'<tr class="{escape(cls)}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return Html(f"<table><tr>{head}</tr>{''.join(body)}</table>")


def heading(text: Any, level: int = 2) -> Html:
    """`<hN>` with escaped text."""
    return Html(f"<h{level}>{escape(text)}</h{level}>")


def paragraph(text: Any, css_class: str | None = None) -> Html:
    """`<p>` with escaped text (html_page wraps a plain string in one of these)."""
    attr = f' class="{escape(css_class)}"' if css_class else ""
    return Html(f"<p{attr}>{escape(text)}</p>")


def link(href: str, text: Any) -> Html:
    """`<a href>` to a page beside this one (`href` relative, escaped)."""
    return Html(f'<a href="{escape(href)}">{escape(text)}</a>')


def bullets(items: Iterable[Any]) -> Html:
    """`<ul>` of escaped items."""
    return Html("<ul>" + "".join(f"<li>{_fragment(i)}</li>" for i in items) + "</ul>")


def preformatted(text: Any) -> Html:
    """`<pre>` with escaped text: model output with its line breaks kept."""
    return Html(f"<pre>{escape(text)}</pre>")


def figure(png: bytes, caption: str) -> Html:
    """The PNG embedded as a base64 `data:` URI (the page needs no other file), captioned."""
    data = base64.b64encode(png).decode("ascii")
    return Html(
        f'<figure><img src="data:image/png;base64,{data}" alt="{escape(caption)}">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


CSS = """body{font-family:sans-serif;margin:2em;max-width:90em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;
vertical-align:top;text-align:left}pre{white-space:pre-wrap;margin:0;max-width:50em}
figure{margin:1em 0}figure img{max-width:100%}figcaption{font-size:.9em;color:#555}
.note{background:#fff4d6;padding:.5em;border:1px solid #e0c060}"""


def html_page(title: str, body_parts: Iterable[Any], css: str = "") -> str:
    """A self-contained HTML page: `<h1>title</h1>`, then the parts in order.

    A part that is `Html` (from `html_table`, `heading`, `figure`, ...) goes in as it is;
    any other value is text, escaped into a paragraph. `css` is added to the base `CSS`.
    """
    parts = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}\n{css}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
    ]
    parts += [p if isinstance(p, Html) else paragraph(p) for p in body_parts]
    parts.append("</body></html>\n")
    return "\n".join(parts)


# ---------------------------------------------------------------- figures


@dataclass(frozen=True)
class Series:
    """One line of a panel; with `low` and `high` it is drawn with error bars."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    low: Sequence[float] | None = None  # interval bounds, same length as y
    high: Sequence[float] | None = None
    fmt: str = "o-"  # matplotlib format: marker and line style
    color: str | None = None  # None: the next colour of the cycle


@dataclass(frozen=True)
class Panel:
    """One subplot of `errorbar_png`."""

    title: str
    xlabel: str
    ylabel: str
    series: Sequence[Series]
    ylim: tuple[float, float] | None = None
    xticks: Sequence[float] | None = None  # None: integer ticks chosen by matplotlib
    xticklabels: Sequence[str] | None = None
    empty_text: str = "no data"  # shown when no series has a point
    width: float = 1.0  # relative to the other panels


def errorbar_png(
    panels: Sequence[Panel], title: str | None = None, size: tuple[float, float] = (11.0, 4.6)
) -> bytes:
    """The panels side by side as PNG bytes; series with bounds get error bars (capped).

    Drawn on a bare Figure with its Agg canvas, not pyplot: no global backend state and no
    display needed, so it works in any thread of a headless run.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if not panels:
        raise ValueError("errorbar_png: no panels")
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(
        1, len(panels), squeeze=False, gridspec_kw={"width_ratios": [p.width for p in panels]}
    )[0]
    for ax, panel in zip(axes, panels, strict=True):
        drawn = False
        for s in panel.series:
            if not s.y:
                continue
            drawn = True
            style = {"label": s.label, **({"color": s.color} if s.color else {})}
            if s.low is None or s.high is None:
                ax.plot(list(s.x), list(s.y), s.fmt, **style)
                continue
            # clamped at 0: an interval's bound can sit a rounding error past its point
            # (a Wilson bound at 0 of n)
            err = [
                [max(0.0, y - lo) for y, lo in zip(s.y, s.low, strict=True)],
                [max(0.0, hi - y) for y, hi in zip(s.y, s.high, strict=True)],
            ]
            ax.errorbar(list(s.x), list(s.y), yerr=err, fmt=s.fmt, capsize=4, **style)
        if not drawn:
            ax.text(0.5, 0.5, panel.empty_text, ha="center", va="center", transform=ax.transAxes)
        if panel.xticks is not None and len(panel.xticks):
            ax.set_xticks(list(panel.xticks), panel.xticklabels)
            ax.set_xlim(min(panel.xticks) - 0.5, max(panel.xticks) + 0.5)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if panel.ylim is not None:
            ax.set_ylim(*panel.ylim)
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title, fontsize=10)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8, loc="lower left")
    if title:
        fig.suptitle(title, fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def heatmap_png(
    matrix: Sequence[Sequence[float | None]],
    rows: Sequence[str],
    cols: Sequence[str],
    title: str,
    label: str,
    size: tuple[float, float] | None = None,
    notes: Sequence[Sequence[str]] | None = None,
    axes: tuple[str, str] | None = None,
) -> bytes:
    """A matrix with values in [0, 1] as a PNG heat map, every set cell written in it (its
    value, or `notes`' text) and unset ones (None) left blank; `axes` names the x and y axes;
    without `size`, the figure grows with the matrix. Drawn on a bare Figure with its Agg
    canvas, as `errorbar_png` is: no pyplot state, no display."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if size is None:
        size = (2.4 + 1.1 * max(1, len(cols)), 1.6 + 0.8 * max(1, len(rows)))
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    values = [[float("nan") if v is None else v for v in row] for row in matrix]
    image = ax.imshow(values, cmap="RdBu", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(matrix):
        for j, v in enumerate(row):
            if v is not None:
                ax.text(
                    j,
                    i,
                    notes[i][j] if notes is not None else f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if abs(v - 0.5) > 0.3 else "black",
                )
    ax.set_xticks(range(len(cols)), list(cols), rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), list(rows))
    if axes is not None:
        ax.set_xlabel(axes[0])
        ax.set_ylabel(axes[1])
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label=label)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()
