"""The report's document model: a list of blocks (headings, paragraphs, lists, tables,
figures) rendered to Markdown and to one self-contained HTML page (figures embedded), plus
the number formatting its tables use."""
from __future__ import annotations

import base64
import html
import math
import re
from pathlib import Path
from typing import Any, Sequence


class Doc:
    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: Sequence[str]) -> None:
        if items:
            self.blocks.append(("ul", list(items)))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]],
              align: str = "") -> None:
        self.blocks.append(("table", list(headers), [list(map(_cell, r)) for r in rows],
                            align))

    def extend(self, other: "Doc") -> None:
        """Append another document's blocks (a part written apart)."""
        self.blocks.extend(other.blocks)

    def img(self, path: Path, rel: str, alt: str, caption: str) -> None:
        self.blocks.append(("img", path, rel, alt, caption))

    # -- Markdown
    def markdown(self) -> str:
        out: list[str] = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append("#" * b[1] + " " + b[2])
            elif kind == "p":
                out.append(b[1])
            elif kind == "ul":
                out.append("\n".join(f"- {i}" for i in b[1]))
            elif kind == "table":
                headers, rows, align = b[1], b[2], b[3]
                esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
                out.append("| " + " | ".join(esc(h) for h in headers) + " |")
                out.append("|" + "|".join(("---:" if (align and i < len(align) and
                                                      align[i] == "r") else "---")
                                          for i in range(len(headers))) + "|")
                out.extend("| " + " | ".join(esc(c) for c in r) + " |" for r in rows)
            elif kind == "img":
                out.append(f"![{b[3]}]({b[2]})\n\n*{b[4]}*")
            out.append("")
        return "\n".join(out)

    # -- HTML (self-contained)
    def html(self, title: str) -> str:
        body: list[str] = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                body.append(f"<h{b[1]}>{_inline(b[2])}</h{b[1]}>")
            elif kind == "p":
                body.append(f"<p>{_inline(b[1])}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1])
                            + "</ul>")
            elif kind == "table":
                headers, rows, align = b[1], b[2], b[3]
                cls = lambda i: (' class="r"' if align and i < len(align)  # noqa: E731
                                 and align[i] == "r" else "")
                head = "".join(f"<th{cls(i)}>{_inline(h)}</th>" for i, h in enumerate(headers))
                trs = "".join("<tr>" + "".join(f"<td{cls(i)}>{_inline(str(c))}</td>"
                                               for i, c in enumerate(r)) + "</tr>"
                              for r in rows)
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody>"
                            "</table>")
            elif kind == "img":
                data = base64.b64encode(Path(b[1]).read_bytes()).decode("ascii")
                body.append(f'<figure><img alt="{html.escape(b[3])}" '
                            f'src="data:image/png;base64,{data}">'
                            f"<figcaption>{_inline(b[4])}</figcaption></figure>")
        style = (
            "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;"
            "max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}"
            "table{border-collapse:collapse;margin:0.6em 0 1.2em}"
            "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:0.92em}"
            "th{background:#f0f0f0}td.r,th.r{text-align:right}"
            "figure{margin:1em 0 2em}img{max-width:100%;border:1px solid #ddd}"
            "figcaption{font-size:0.9em;color:#444;margin-top:0.3em}"
            "code{background:#f4f4f4;padding:0 3px}h2{border-bottom:1px solid #ddd}")
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(title)}</title><style>{style}</style></head><body>\n"
                + "\n".join(body) + "\n</body></html>\n")


def _inline(text: str) -> str:
    """Escape for HTML; `code` and **bold** spans become tags."""
    s = html.escape(text)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)


def _cell(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return fmt_num(v)
    return str(v)


def fmt_num(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a < 1:
        text = f"{v:.{digits}g}"
        if abs(float(text)) < 1:
            return text
    return f"{v:.2f}"     # (also a value just under 1 that rounds to 1: '1.00', not '1')


def _decimals(v: float) -> int:
    """The decimals fmt_num prints for v."""
    a = abs(v)
    if a >= 100:
        return 0 if a >= 1000 else 1
    if a >= 1 or a == 0:
        return 2
    return 2 - math.floor(math.log10(a))


def interval_places(estimate: float, low: float, high: float) -> int:
    """The decimals at which an estimate and its interval's ends are printed together: the
    fewer of fmt_num's for the largest of them and two significant digits of the interval's
    width. So no value is printed finer than its interval resolves, nor in exponent form:
    '0.000 [-0.027, 0.030]', not '-7.55e-05 [-0.0265, 0.0304]'."""
    values = [v for v in (estimate, low, high) if math.isfinite(v)]
    width = high - low if math.isfinite(high - low) else 0.0
    places = _decimals(max(values, key=abs)) if values else 2
    if width > 0:
        places = min(places, max(0, 1 - math.floor(math.log10(width))))
    return places


def fmt_places(v: float, places: int) -> str:
    """v at `places` decimals (thousands separated); a value that rounds to zero unsigned."""
    if not math.isfinite(v):
        return fmt_num(v)
    return f"{0.0 if round(v, places) == 0 else v:,.{places}f}"


def also_as(png: Path) -> str:
    """' Also as plots/x.svg and plots/x.pdf.': where a figure's vector copies are (every plot
    is written as PNG, SVG and PDF; analysis/plot_style.save)."""
    return f" Also as plots/{png.stem}.svg and plots/{png.stem}.pdf."
