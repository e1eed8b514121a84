"""The HTML of the reports: one stylesheet, the page frame, tables and embedded figures.

Every report is a single self-contained file (figures embedded as PNG data), laid
out to be read in a browser window 1280 pixels wide: the first screen holds the
verdict in words and the report's main figure, tables have borders, zebra rows
and right-aligned numbers, and a table or code block wider than the page scrolls
inside its own box instead of widening the page.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["STYLE", "html_document", "markdown_to_html", "table_html", "embedded_figure",
           "png_figure", "verdict_banner", "STATUS_COLOURS", "scoped_style"]

# Status -> (text colour, background) of the verdict banner; any other status is red.
STATUS_COLOURS = {"converged": ("#0b6b1f", "#e8f5eb"),
                  "not converged": ("#8a5200", "#fdf3e1")}
_FAILED = ("#a4161a", "#fdeaea")

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;
 color:#1b1f24;line-height:1.45;margin:0;background:#fff}
main{max-width:1240px;margin:0 auto;padding:12px 20px 48px}
h1{font-size:1.45rem;margin:6px 0 10px}
h2{font-size:1.2rem;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid #d8dde3}
p,li{max-width:75em}
.verdict{border-left:10px solid var(--fg);background:var(--bg);border-radius:4px;
 padding:10px 18px;margin:0 0 12px}
.verdict .status{display:block;font-size:2.1rem;font-weight:800;letter-spacing:.03em;
 color:var(--fg);line-height:1.15}
.verdict .headline{margin:6px 0 0;font-size:.95rem}
.failure{color:#a4161a;font-weight:600}
figure{margin:0 0 12px}
figure img{display:block;max-width:100%;height:auto}
figure.main img{max-height:460px}
figcaption{font-size:.85rem;color:#4a525c;margin-top:2px}
.figures{display:flex;flex-wrap:wrap;gap:16px}
.figures figure{flex:1 1 480px;min-width:0}
.scroll{overflow-x:auto;max-width:100%;margin:6px 0 14px}
table{border-collapse:collapse;font-size:.86rem}
th,td{border:1px solid #c9d0d8;padding:4px 7px;text-align:left;vertical-align:top}
th{background:#e9eef4;font-weight:600}
tr:nth-child(even) td{background:#f5f7fa}
th.num,td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
pre{overflow-x:auto;background:#f5f7fa;border:1px solid #d8dde3;padding:8px 12px;
 font-size:.82rem;max-width:100%}
"""



def scoped_style(scope: str) -> str:
    """The rules of :data:`STYLE` for the verdict, figures and tables, each under the
    selector ``scope`` (a notebook cell: no rule reaches the page around it)."""
    rules = [rule for rule in re.findall(r"[^{}]+\{[^}]*\}", STYLE)
             if rule.strip().split("{")[0].strip().startswith(
                 (".verdict", ".failure", "figure", ".scroll", "table", "th", "tr", "td"))]
    return "".join(", ".join(f"{scope} {sel.strip()}" for sel in rule.split("{")[0].split(","))
                   + "{" + rule.split("{", 1)[1] for rule in rules)


# A cell that is a number, or numbers joined as the reports write them
# ("-2257.82 +- 1", "0 to 1.79e+04"), or n/a: right-aligned in its column.
_NUMBER = r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?%?|[-+]?inf|nan"
_NUMERIC = re.compile(rf"^({_NUMBER})(\s*(\+-|to)\s*({_NUMBER}))?$", re.IGNORECASE)
_MISSING = {"", "n/a", "-", "none"}


def _inline(text: str) -> str:
    parts = html.escape(text).split("**")
    return "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))


def table_html(rows: list[list[str]]) -> str:
    """A table from rows of cell texts (the first row is the header), in a box that
    scrolls sideways when wider than the page; columns whose cells are all numbers
    (or missing) are right-aligned."""
    head, *body = rows
    numeric = [bool(body) and all(_NUMERIC.match(r[j].strip()) or r[j].strip().lower()
                                  in _MISSING for r in body if j < len(r))
               and any(_NUMERIC.match(r[j].strip()) for r in body if j < len(r))
               for j in range(len(head))]

    def cells(tag, row):
        return "".join(f"<{tag}{' class=num' if j < len(numeric) and numeric[j] else ''}>"
                       f"{_inline(c)}</{tag}>" for j, c in enumerate(row))

    return ("<div class=scroll><table><thead><tr>" + cells("th", head) + "</tr></thead><tbody>"
            + "".join(f"<tr>{cells('td', r)}</tr>" for r in body) + "</tbody></table></div>")


def markdown_to_html(text: str) -> str:
    """The little Markdown the reports use (headings, pipe tables, bullets, paragraphs,
    bold) as HTML."""
    out, rows, items = [], [], []

    def flush():
        if rows:
            out.append(table_html(rows))
            rows.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
        elif line.startswith("- "):
            items.append(line[2:])
        elif line.startswith(("# ", "## ", "### ")):
            flush()
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level + 1:])}</h{level}>")
        else:
            flush()
            if line.strip():
                out.append(f"<p>{_inline(line)}</p>")
    flush()
    return "".join(out)


def embedded_figure(path: Path, alt: str, caption: str = "", *, main: bool = False,
                    element_id: str | None = None) -> str:
    """A ``<figure>`` with the PNG at ``path`` embedded as data (``main``: the report's
    first figure, kept short enough to share the first screen with the verdict)."""
    return png_figure(Path(path).read_bytes(), alt, caption, main=main, element_id=element_id)


def png_figure(png: bytes, alt: str, caption: str = "", *, main: bool = False,
               element_id: str | None = None) -> str:
    """:func:`embedded_figure` of PNG bytes."""
    data = base64.b64encode(png).decode()
    attrs = (f" id='{html.escape(element_id)}'" if element_id else "") + (
        " class='main'" if main else "")
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return (f"<figure{attrs}><img alt='{html.escape(alt)}' "
            f"src='data:image/png;base64,{data}'/>{cap}</figure>")


def verdict_banner(status: str, headline: str = "") -> str:
    """The verdict in words, large and coloured by status, with its one-paragraph headline."""
    fg, bg = STATUS_COLOURS.get(status, _FAILED)
    text = f"<p class=headline>{html.escape(headline)}</p>" if headline else ""
    return (f"<div class=verdict style='--fg:{fg};--bg:{bg}'>"
            f"<span class=status>{html.escape(status.upper())}</span>{text}</div>")


def html_document(title: str, body: str) -> str:
    """A complete page: ``<head>`` with the title and the stylesheet, ``body`` in ``<main>``."""
    return ("<!doctype html><html lang=en><head><meta charset='utf-8'>"
            "<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
            f"<body><main>{body}</main></body></html>")
