"""Every plot function writes a non-empty PNG (analysis/plots.py)."""
import pytest

from analysis import plots
from analysis.aggregate import aggregate

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", list(plots.PLOTS))
def test_plot_writes_png(name, fixture_groups, tmp_path):
    fn, _ = plots.PLOTS[name]
    out = fn(fixture_groups, tmp_path / f"{name}.png")
    assert out is not None and out.exists()
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000


def test_plots_with_chosen_batch(fixture_groups, tmp_path):
    out = plots.plot_epoch_breakdown(fixture_groups, tmp_path / "b.png", batch=1024)
    assert out.exists()
    assert plots.plot_epoch_breakdown(fixture_groups, tmp_path / "x.png", batch=7) is None


def test_no_data_means_no_png(fixture_records, tmp_path):
    explicit = aggregate(r for r in fixture_records
                         if r["config"]["strategy"] in ("pinned", "pageable"))
    assert plots.plot_overlap_efficiency(explicit, tmp_path / "o.png") is None
    assert plots.plot_um_counters(explicit, tmp_path / "u.png") is None
    assert not (tmp_path / "o.png").exists() and not (tmp_path / "u.png").exists()


def test_a_strategy_without_an_assigned_colour_gets_a_stable_one():
    from analysis.plot_style import STRATEGY_COLORS, strategy_color
    assert "a-strategy-added-later" not in STRATEGY_COLORS
    c = strategy_color("a-strategy-added-later")
    assert len(c) == 3 and c == strategy_color("a-strategy-added-later")
    assert strategy_color("pinned") == STRATEGY_COLORS["pinned"]
