"""analysis/ has no import cycle: every module's imports (module level and inside functions,
relative or absolute) form an acyclic graph among analysis/*.py."""
import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"
PACKAGE = "analysis"


def modules() -> set[str]:
    return {p.stem for p in ANALYSIS.glob("*.py") if p.stem != "__init__"}


def imported(source: str, names: set[str]) -> set[str]:
    """The analysis modules a module's source imports, wherever the import statement is."""
    out = set()

    def add(dotted: str, alias_names=()):
        parts = dotted.split(".") if dotted else []
        if parts[:1] == [PACKAGE]:
            parts = parts[1:]
        if parts and parts[0] in names:
            out.add(parts[0])
        elif not parts:                         # `from analysis import x` / `from . import x`
            out.update(a for a in alias_names if a in names)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == PACKAGE:
                    add(a.name)
        elif isinstance(node, ast.ImportFrom):
            aliases = [a.name for a in node.names]
            if node.level > 0:                  # relative: from .x import y / from . import x
                add(node.module or "", aliases)
            elif node.module and node.module.split(".")[0] == PACKAGE:
                add(node.module, aliases)
    return out


def import_graph() -> dict[str, set[str]]:
    names = modules()
    return {m: imported((ANALYSIS / f"{m}.py").read_text(encoding="utf-8"), names) - {m}
            for m in names}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search with colours)."""
    state: dict[str, int] = {}          # 1 = on the current path, 2 = done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_parser_sees_every_kind_of_import():
    names = {"stats", "plots", "cost_model", "aggregate", "stream"}
    src = ("from .stats import summarize\n"
           "import analysis.plots\n"
           "from analysis import cost_model\n"
           "from analysis.aggregate import Group\n"
           "import numpy\n"
           "def f():\n"
           "    from .stream import curves\n")
    assert imported(src, names) == names


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    a = "def plot():\n    from .b import x\n"
    b = "from .a import y\n"
    graph = {"a": imported(a, {"a", "b"}), "b": imported(b, {"a", "b"})}
    assert find_cycle(graph) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_analysis_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 10, "no analysis modules found"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in analysis/: " + " -> ".join(cycle)


def test_the_figures_and_the_docs_blocks_share_one_best_form_table():
    from analysis import block_generators, strategy_pairs
    assert block_generators.IMPROVES is strategy_pairs.IMPROVES
    graph = import_graph()
    assert "block_generators" not in graph["plot_style"]
    assert "cost_model" not in graph["parity_plot"]
