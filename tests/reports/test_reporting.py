"""rzero.render: Markdown cells stay one cell, HTML escapes model text, figures are PNG."""

from __future__ import annotations

import base64
import re

import pytest

from rzero.render import (
    Html,
    Panel,
    Series,
    bullets,
    errorbar_png,
    escape,
    figure,
    heading,
    html_page,
    html_table,
    markdown_cell,
    markdown_table,
    paragraph,
    preformatted,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SCRIPT = "<script>alert('x')</script>"

# ---------------------------------------------------------------- Markdown


def test_markdown_cell_escapes_pipes_and_newlines():
    assert markdown_cell("a|b") == "a\\|b"
    assert markdown_cell("line 1\nline 2\r\nline 3") == "line 1 line 2 line 3"
    assert markdown_cell(None) == ""
    assert markdown_cell(0.5) == "0.5"


def test_markdown_table_layout():
    md = markdown_table(
        ["benchmark", "n", "pass@1"],
        [["synthetic", 4, "100.0"], ["**average**", "", "100.0"]],
        align="lrr",
    )
    assert md == (
        "| benchmark | n | pass@1 |\n"
        "|---|---:|---:|\n"
        "| synthetic | 4 | 100.0 |\n"
        "| **average** | | 100.0 |\n"
    )  # an empty cell is one space


def test_markdown_table_pipe_in_a_cell_stays_in_its_cell():
    md = markdown_table(["question", "label"], [["is |x| = 2?", "a\nb"]])
    body = md.splitlines()[2]
    assert body == "| is \\|x\\| = 2? | a b |"
    # splitting on unescaped pipes gives exactly the 2 cells
    cells = re.split(r"(?<!\\)\|", body)[1:-1]
    assert len(cells) == 2
    assert len(md.splitlines()) == 3  # header, rule, one row: the newline did not split it


def test_markdown_table_rejects_ragged_rows_and_bad_align():
    with pytest.raises(ValueError, match="2 cells; the header has 3"):
        markdown_table(["a", "b", "c"], [["1", "2"]])
    with pytest.raises(ValueError, match="align='lx'"):
        markdown_table(["a", "b"], [], align="lx")


# ---------------------------------------------------------------- HTML


def test_escape():
    assert escape(SCRIPT) == "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
    assert escape('"&"') == "&quot;&amp;&quot;"
    assert escape(None) == ""
    assert isinstance(escape("x"), Html)


def test_html_table_escapes_every_plain_cell():
    table = html_table([SCRIPT], [[SCRIPT], ["</td><td>x"]], row_classes=['"><b', "ok"])
    assert "<script" not in table
    assert table.count("&lt;script&gt;") == 2  # header and cell
    assert "&lt;/td&gt;&lt;td&gt;x" in table
    assert '<tr class="&quot;&gt;&lt;b">' in table  # a class cannot close its attribute
    assert isinstance(table, Html)


def test_html_table_keeps_markup_built_from_escaped_text():
    cell = preformatted("<b>1</b>\nline 2")
    table = html_table(["answer"], [[cell]])
    assert "<td><pre>&lt;b&gt;1&lt;/b&gt;\nline 2</pre></td>" in table
    with pytest.raises(ValueError):
        html_table(["a"], [["1"], ["2"]], row_classes=["only one"])


def test_html_page_escapes_text_parts_and_title():
    page = html_page(
        SCRIPT,
        [
            SCRIPT,
            heading(SCRIPT),
            paragraph(SCRIPT, "note"),
            bullets([SCRIPT, 3]),
            html_table(["h"], [[SCRIPT]]),
        ],
    )
    assert "<script" not in page
    # title twice (<title>, <h1>), then a paragraph, heading, note, list item and table cell
    assert page.count("&lt;script&gt;") == 7
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    assert '<p class="note">' in page and "<li>3</li>" in page


def test_figure_embeds_the_png_and_escapes_the_caption():
    png = errorbar_png([Panel("t", "x", "y", [Series("s", [0, 1], [0.5, 0.7])])])
    html = figure(png, 'a "quoted" <caption>')
    data = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    assert base64.b64decode(data) == png  # the page needs no other file
    assert 'alt="a &quot;quoted&quot; &lt;caption&gt;"' in html


# ---------------------------------------------------------------- figures


def test_errorbar_png_draws_bars_lines_and_empty_panels():
    with_bars = Series(
        "acc", [1, 2], [0.7, 0.75], low=[0.397, 0.301], high=[0.892, 0.954], fmt="s", color="C1"
    )
    png = errorbar_png(
        [
            Panel(
                "bars",
                "iteration",
                "accuracy",
                [with_bars],
                ylim=(0, 1),
                xticks=[1, 2],
                xticklabels=["1\n(step 15)", "2\n(step 30)"],
            ),
            Panel("line", "step", "pass@1", [Series("eval", [0, 1, 2], [1, 2, 3])]),
            Panel("nothing", "x", "y", [Series("none", [], [])], empty_text="no audit yet"),
        ],
        title="three panels",
    )
    assert png[:8] == PNG_MAGIC
    assert len(png) > 5000


def test_errorbar_png_checks_its_input():
    with pytest.raises(ValueError, match="no panels"):
        errorbar_png([])
    ragged = Series("s", [1, 2], [0.5, 0.6], low=[0.4], high=[0.7, 0.8])
    with pytest.raises(ValueError):
        errorbar_png([Panel("t", "x", "y", [ragged])])
