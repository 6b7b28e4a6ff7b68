"""Figures a paper can print (analysis/plots.py, parity_plot.py, plot_style.py): every figure as
PNG (>= 200 dpi), SVG and PDF, byte-stable; no bars on a log axis; no empty panel; legends
built from what was drawn, naming each interval's method and exact coverage; one hue per
approach with the naive and best forms told apart by marker."""
import copy
import struct

import matplotlib
import pytest
from matplotlib.container import BarContainer

from analysis import cost_model, parity_plot, plot_style, plots
from analysis.aggregate import STRATEGY_ORDER, aggregate
from analysis.primitives import PrimitiveTable
from analysis.records import load_records, ok_records
from analysis.stats import summarize
from analysis.strategy_pairs import IMPROVES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def figures(monkeypatch):
    """Every figure handed to plot_style.save, kept for inspection after it is written."""
    kept = []
    save = plot_style.save

    def spy(fig, path):
        kept.append(fig)
        return save(fig, path)

    monkeypatch.setattr(plot_style, "save", spy)
    return kept


@pytest.fixture(scope="module")
def mixed_groups(fixtures_dir):
    """processes.jsonl with pinned cut to 5 processes and um-prefetch to 3: intervals of
    97.85% (n = 10), 93.75% (n = 5, [min, max]) and 75% (n = 3), and none (n = 1)."""
    keep = {"pinned": 5, "um-prefetch": 3}
    seen: dict[str, int] = {}
    out = []
    for r in ok_records(load_records(fixtures_dir / "processes.jsonl")):
        s = r["config"]["strategy"]
        if s in keep and not r["config"].get("profile"):
            seen[s] = seen.get(s, 0) + 1
            if seen[s] > keep[s]:
                continue
        out.append(r)
    return aggregate(out)


@pytest.fixture(scope="module")
def twelve_groups(fixtures_dir):
    """pinned's 10 processes cloned into every strategy of STRATEGY_ORDER (times scaled), at
    batch 256 and 1024: twelve curves to tell apart."""
    base = [r for r in ok_records(load_records(fixtures_dir / "processes.jsonl"))
            if r["config"]["strategy"] == "pinned"]
    out = []
    for i, name in enumerate(STRATEGY_ORDER):
        for batch, scale in ((256, 1.0), (1024, 0.5)):
            for r in base:
                c = copy.deepcopy(r)
                c["config"]["strategy"], c["config"]["batch"] = name, batch
                c["run_id"] = f"{c['run_id']}-{name}-{batch}"
                for e in c["epochs"]:
                    for k in ("wall_ms", "gpu_ms", "compute_ms"):
                        if e.get(k) is not None:
                            e[k] *= scale * (0.6 + 0.07 * i)
                out.append(c)
    return aggregate(out)


def png_dpi(data: bytes) -> float:
    """Pixels per inch from the PNG's pHYs chunk."""
    i = data.index(b"pHYs")
    ppm_x, _, unit = struct.unpack(">IIB", data[i + 4:i + 13])
    assert unit == 1                      # metres
    return ppm_x * 0.0254


def legend_texts(fig) -> list[str]:
    return [t.get_text() for lg in fig.legends for t in lg.get_texts()]


def check_paper_ready(fig) -> None:
    for ax in fig.axes:
        drawn = len(ax.lines) + len(ax.collections) + len(ax.patches) + len(ax.containers)
        assert drawn > 0, f"empty panel: {ax.get_title()}"
        if ax.get_yscale() == "log":
            assert not any(isinstance(c, BarContainer) for c in ax.containers), \
                f"bars on a log axis: {ax.get_title()}"
    text = " ".join(legend_texts(fig) + [fig._suptitle.get_text() if fig._suptitle else ""])
    assert "bootstrap" not in text
    assert "95% interval" not in text


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(plots.PLOTS))
def test_every_plot_writes_png_svg_and_pdf(name, mixed_groups, tmp_path, figures):
    fn, _ = plots.PLOTS[name]
    out = fn(mixed_groups, tmp_path / f"{name}.png")
    if out is None:                       # no data for it in this slice (e.g. UM counters)
        assert not list(tmp_path.iterdir())
        return
    assert out == tmp_path / f"{name}.png"
    png, svg, pdf = plot_style.companions(out)
    assert png.read_bytes().startswith(PNG_MAGIC) and len(png.read_bytes()) > 10_000
    assert png_dpi(png.read_bytes()) == pytest.approx(plot_style.DPI, abs=1)
    assert plot_style.DPI >= 200
    assert svg.read_bytes().lstrip().startswith(b"<?xml") and b"<svg" in svg.read_bytes()
    assert pdf.read_bytes().startswith(b"%PDF")
    check_paper_ready(figures[-1])


@pytest.mark.parametrize("name", list(plots.PLOTS))
def test_every_plot_is_paper_ready_on_the_main_fixture(name, fixture_groups, tmp_path,
                                                       figures):
    fn, _ = plots.PLOTS[name]
    out = fn(fixture_groups, tmp_path / f"{name}.png")
    assert out is not None and all(p.exists() for p in plot_style.companions(out))
    check_paper_ready(figures[-1])


def test_figures_are_byte_stable(mixed_groups, tmp_path):
    for name in ("ms_per_epoch", "overlap_efficiency"):
        fn, _ = plots.PLOTS[name]
        a = fn(mixed_groups, tmp_path / "a" / f"{name}.png")
        b = fn(mixed_groups, tmp_path / "b" / f"{name}.png")
        for fa, fb in zip(plot_style.companions(a), plot_style.companions(b)):
            assert fa.read_bytes() == fb.read_bytes(), fa.name


def test_pdf_fonts_are_embedded_as_truetype_and_no_date_is_written(mixed_groups, tmp_path):
    out = plots.plot_ms_per_epoch(mixed_groups, tmp_path / "m.png")
    pdf = out.with_suffix(".pdf").read_bytes()
    # fonttype 42: TrueType outlines (a CIDFontType2 under a Type0 font), not Type 3 bitmaps
    assert b"/CIDFontType2" in pdf or b"/TrueType" in pdf
    assert b"/Type3" not in pdf
    assert b"CreationDate" not in pdf
    svg = out.with_suffix(".svg").read_text()
    assert "<dc:date>" not in svg


def test_plots_with_chosen_batch(fixture_groups, tmp_path):
    out = plots.plot_epoch_breakdown(fixture_groups, tmp_path / "b.png", batch=1024)
    assert out.exists()
    assert plots.plot_epoch_breakdown(fixture_groups, tmp_path / "x.png", batch=7) is None


def test_no_data_means_no_figure(fixture_records, tmp_path):
    explicit = aggregate(r for r in fixture_records
                         if r["config"]["strategy"] in ("pinned", "pageable"))
    assert plots.plot_overlap_efficiency(explicit, tmp_path / "o.png") is None
    assert plots.plot_um_counters(explicit, tmp_path / "u.png") is None
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------------------
# What the legends say
# --------------------------------------------------------------------------------------
def test_whisker_legend_names_method_and_exact_coverage(mixed_groups, tmp_path, figures):
    plots.plot_ms_per_epoch(mixed_groups, tmp_path / "m.png")
    whisker = [t for t in legend_texts(figures[-1]) if t.startswith("whisker")]
    assert len(whisker) == 1
    text = whisker[0].replace("\n", " ")
    assert "order-statistic interval of the median over processes" in text
    assert "coverage 97.85% (n = 10)" in text
    assert "[min, max] where n < 6: coverage 93.75% at n = 5, 75% at n = 3" in text
    assert "none below 3 processes" in text


def test_interval_label():
    label = plot_style.interval_label
    assert label([]) is None
    assert label([summarize([1.0])]) == "whisker: none (fewer than 3 processes)"
    assert label([summarize(range(10)), summarize(range(20))]) == (
        "whisker: order-statistic interval of the median over processes; "
        "coverage 95.86%–97.85% (n = 10–20)")
    assert label([summarize(range(5))], "band") == (
        "band: order-statistic interval of the median over processes; "
        "[min, max] where n < 6: coverage 93.75% at n = 5")


def test_overlap_legend_lists_only_what_was_drawn(fixture_groups, tmp_path, figures):
    # double-buffer at depths 2 and 3, always one copy stream, in two of the four panels
    out = plots.plot_overlap_efficiency(fixture_groups, tmp_path / "o.png")
    assert out is not None
    fig = figures[-1]
    texts = legend_texts(fig)
    assert not any("copy stream" in t for t in texts)
    assert "1 copy stream" in fig._suptitle.get_text()
    assert not any(t.startswith("1 = ") and "0 = serial" in t for t in texts)
    assert [ax.get_title() for ax in fig.axes] == [
        "static data (never changes), u8 transfer",
        "refresh (host rewrites the data every epoch), u8 transfer"]


def test_throughput_tells_twelve_strategies_apart(twelve_groups, tmp_path, figures):
    plots.plot_throughput_vs_batch(twelve_groups, tmp_path / "t.png")
    fig = figures[-1]
    key = fig.legends[0]
    names = [t.get_text() for t in key.get_texts()]
    assert names == list(STRATEGY_ORDER)
    looks = {(matplotlib.colors.to_hex(h.get_color()), h.get_marker(), h.get_linestyle())
             for h in key.legend_handles}
    assert len(looks) == 12
    check_paper_ready(fig)


# --------------------------------------------------------------------------------------
# Colours and markers
# --------------------------------------------------------------------------------------
def test_one_hue_per_approach_with_the_best_form_told_apart_by_marker():
    petroff = [matplotlib.colors.to_hex(c) for c in matplotlib.color_sequences["petroff10"]]
    styles = {s: plot_style.strategy_style(s) for s in STRATEGY_ORDER}
    assert len({(st["color"], st["marker"]) for st in styles.values()}) == len(STRATEGY_ORDER)
    for best, naive in IMPROVES.items():
        assert styles[best]["color"] == styles[naive]["color"]
        assert styles[best]["marker"] != styles[naive]["marker"]
        assert styles[best]["linestyle"] != styles[naive]["linestyle"]
    naive_forms = sorted(s for s in STRATEGY_ORDER if s not in IMPROVES)
    assert [styles[s]["color"] for s in naive_forms] == petroff[:len(naive_forms)]
    assert len({styles[s]["color"] for s in naive_forms}) == len(naive_forms)


def test_a_strategy_without_an_assigned_colour_gets_a_stable_one():
    from analysis.plot_style import STRATEGY_COLORS, strategy_color
    assert "a-strategy-added-later" not in STRATEGY_COLORS
    c = strategy_color("a-strategy-added-later")
    assert len(c) == 3 and c == strategy_color("a-strategy-added-later")
    assert strategy_color("pinned") == STRATEGY_COLORS["pinned"]


def test_log_axis_ticks_are_readable():
    fig, ax = matplotlib.pyplot.subplots()
    ax.plot([0, 1], [3.0, 40.0])
    plot_style.log_axis(ax)
    ax.set_ylim(3.0, 40.0)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels()
              if t.get_text() and 3.0 <= t.get_position()[1] <= 40.0]
    matplotlib.pyplot.close(fig)
    assert labels == ["5", "10", "20"]


# --------------------------------------------------------------------------------------
# The cost model's parity plot
# --------------------------------------------------------------------------------------
def test_parity_plot_labels_batch_and_transfer(fixture_groups, fixtures_dir, tmp_path,
                                               figures):
    tables = PrimitiveTable.load_all([fixtures_dir / "primitives.jsonl"])
    comparisons = cost_model.compare(fixture_groups, tables)
    out = parity_plot.plot_parity(comparisons, tmp_path / "p.png", cost_model.UNEXPLAINED)
    assert all(p.exists() for p in plot_style.companions(out))
    fig = figures[-1]
    titles = [ax.get_title() for ax in fig.axes]
    assert any(t.startswith("batch 256: GPU time") for t in titles)
    assert any(t.startswith("batch 1024: wall time") for t in titles)
    texts = legend_texts(fig)
    assert "filled: u8 transfer" in texts
    assert "hollow: f32 transfer" not in texts          # no f32 configuration in the fixture
    check_paper_ready(fig)


def test_parity_band_default_is_the_cost_models_limit():
    assert parity_plot.DEFAULT_BAND == cost_model.UNEXPLAINED
