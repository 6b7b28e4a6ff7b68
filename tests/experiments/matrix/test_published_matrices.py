"""The published matrices hold what the statistics rules ask of them (docs/methodology.md,
"Statistics over processes"): results.toml gives every batch-256 configuration 10 timing
processes of 20 steady epochs and one profiled process, runs every strategy at every launch form
its data path allows there (each once) with resident at the same form and step beside it, keeps
batch 64 and 1024 at each strategy's own form; guard.toml is a subset of it with its settings;
spread.toml gives its conditions 10 processes of 20 steady epochs; the counts the files'
comments state are what they expand to."""
import collections
import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MATRICES = REPO / "experiments" / "matrix" / "matrices"
FAKE = Path(__file__).resolve().parent / "fake_memstrat.py"


@pytest.fixture(scope="module")
def fake():
    """fake_memstrat.py as a module: the launch form and step a cell's arguments run with."""
    spec = importlib.util.spec_from_file_location("fake_memstrat", FAKE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def results(run_matrix, describe):
    return run_matrix.load_matrix(MATRICES / "results.toml", describe)


def config(cell):
    """A configuration: its cells but for the repeat and the profiler."""
    return dataclasses.replace(cell, repeat=0, profile=None)


def ran(fake, cell):
    """(the launch form the cell runs, its step), as memstrat decides them."""
    args = cell.train_args()
    a = fake.train_parser().parse_args(args)
    _, form, step, refused = fake.launch_run(a, fake.given_options(args))
    assert refused is None, (cell.key, refused)
    return form, step


def timing(m):
    """configuration -> (unprofiled processes, profiled processes)."""
    out = collections.defaultdict(lambda: [0, 0])
    for c in m.cells:
        out[config(c)][0 if c.profile is False else 1] += 1
    return out


def test_batch_256_rows_have_10_processes_of_20_steady_epochs(results):
    counts = timing(results)
    b256 = {k: v for k, v in counts.items() if k.batch == 256}
    assert {(k.scenario, k.transfer) for k in b256} == {
        (s, t) for s in ("static", "refresh") for t in ("u8", "f32")}
    for k, (unprofiled, profiled) in b256.items():
        assert unprofiled == 10 and k.epochs >= 21, k.key
        # one profiled process per configuration for the counters, the deeper pipelines apart
        assert profiled == (0 if k.depth == 3 else 1), k.key
    assert {c.repeat for c in results.cells if c.profile is not False} == {0}


def test_every_strategy_runs_every_form_it_allows_once_at_batch_256(results, all_strategies, fake):
    forms = collections.defaultdict(list)
    for k in timing(results):
        if k.batch == 256 and k.depth != 3:
            forms[(k.strategy, k.scenario, k.transfer)].append(ran(fake, k))
    assert {k.strategy for k in timing(results)} == {s["name"] for s in all_strategies}
    for s in all_strategies:
        for scenario in ("static", "refresh"):
            for transfer in ("u8", "f32"):
                got = [form for form, _ in forms[(s["name"], scenario, transfer)]]
                expected = s["launch_forms"][scenario]
                if s["name"] == "resident" and scenario == "static":
                    # also with the layer-by-layer step at per-batch and graph
                    expected = expected + ["per-batch", "graph"]
                assert sorted(got) == sorted(expected), (s["name"], scenario, transfer)
    resident = {form for form, _ in forms[("resident", "static", "u8")]}
    assert resident == {"per-batch", "graph", "kernel-per-chunk", "kernel"}


def test_each_strategy_runs_its_own_form_as_auto(results, all_strategies):
    for s in all_strategies:
        autos = [k for k in timing(results) if k.strategy == s["name"] and k.launch_form is None
                 and k.fused is None]
        assert {(k.scenario, k.batch) for k in autos} == {
            (sc, b) for sc in ("static", "refresh") for b in (64, 256, 1024)}, s["name"]


def test_every_configuration_has_resident_at_its_form_and_step(results, fake):
    resident = {(k.transfer, k.batch, *ran(fake, k)) for k in timing(results)
                if k.strategy == "resident" and k.scenario == "static"}
    for k in timing(results):
        form, step = ran(fake, k)
        assert (k.transfer, k.batch, form, step) in resident, k.key


def test_batch_64_and_1024_run_each_strategys_own_form_with_fewer_processes(results):
    for k, (unprofiled, _) in timing(results).items():
        if k.batch == 256:
            continue
        assert unprofiled == (5 if k.scenario == "static" else 3), k.key
        assert k.epochs >= 21
        if k.strategy != "resident":
            assert k.launch_form is None and k.fused is None, k.key


def test_the_deeper_pipelines_the_docs_use(results):
    deeper = {(k.strategy, k.batch, k.transfer, k.depth, k.copy_streams)
              for k in timing(results) if k.depth == 3}
    assert deeper == {(s, b, t, 3, c) for s, c in (("double-buffer", 2),
                                                    ("double-buffer-graph", 2),
                                                    ("zero-copy-staged", None))
                      for b in (256, 1024) for t in ("u8", "f32")}


def test_results_states_its_size(results):
    text = (MATRICES / "results.toml").read_text()
    assert f"SIZE: {len(results.cells):,} processes" in text
    for batch, n in collections.Counter(c.batch for c in results.cells).items():
        assert re.search(rf"^#   batch {batch} .*=\s+{n:,}$", text, re.M), (batch, n)
    assert re.search(rf"^#   total\s+{len(results.cells):,}$", text, re.M)


def test_guard_is_a_subset_of_the_results_set_with_its_settings(run_matrix, describe, results,
                                                                all_strategies):
    guard = run_matrix.load_matrix(MATRICES / "guard.toml", describe)
    stream = run_matrix.load_matrix(MATRICES / "stream.toml", describe)
    published = set(timing(results)) | set(timing(stream))
    counts = timing(guard)
    for k, (unprofiled, profiled) in counts.items():
        assert k in published, k.key
        assert (unprofiled, profiled) == (7, 0), k.key
        assert k.batch == 256
    by_scenario = collections.defaultdict(set)
    for k in counts:
        by_scenario[k.scenario].add((k.strategy, k.transfer))
    # every strategy in static, both transfers; the paths of each kind of buffer in the others
    assert by_scenario["static"] == {(s["name"], t) for s in all_strategies
                                     for t in ("u8", "f32")}
    assert by_scenario["refresh"] == {(s, "u8") for s in ("resident", "pinned-graph",
                                                           "double-buffer-graph",
                                                           "zero-copy-staged",
                                                           "um-prefetch-coarse")}
    assert by_scenario["stream"] == {(s, "u8") for s in ("pinned", "double-buffer", "zero-copy")}
    text = (MATRICES / "guard.toml").read_text()
    assert f"{len(guard.cells)} processes" in text and f"({len(guard.cells)} runs)" in text
    static = sum(1 for k in counts if k.scenario == "static")
    assert f"{static // 2} configurations x 2 transfers = {static}" in text
    assert f"{len(counts)} configurations, each as 7 processes" in text
    assert f"over the {len(counts)} configurations" in text


# --------------------------------------------------------------------------------------
# compute.toml: the hidden-width sweep
# --------------------------------------------------------------------------------------
SWEEP = {(64,), (1024,), (4096,), (1024, 1024)}


@pytest.fixture(scope="module")
def compute(run_matrix, describe):
    return run_matrix.load_matrix(MATRICES / "compute.toml", describe)


def test_compute_sweeps_the_widths_with_10_processes_of_20_steady_epochs(compute):
    counts = timing(compute)
    assert {k.hidden for k in counts} == SWEEP          # 256: results.toml's batch-256 rows
    for k, (unprofiled, profiled) in counts.items():
        assert (unprofiled, profiled) == (10, 0), k.key
        assert k.batch == 256 and k.epochs >= 21, k.key
    assert {c.profile for c in compute.cells} == {False}


# stream.toml's strategies: one per hand-off kind
STREAM_STRATEGIES = {"pageable", "pinned", "double-buffer", "zero-copy", "um-prefetch"}


def test_compute_runs_every_strategy_at_its_own_form_at_every_width(compute, all_strategies):
    counts = timing(compute)
    for s in all_strategies:
        scenarios = ("static", "refresh") + (("stream",) if s["name"] in STREAM_STRATEGIES
                                             else ())
        for hidden in SWEEP:
            got = {(k.scenario, k.transfer) for k in counts if k.strategy == s["name"]
                   and k.hidden == hidden and (s["name"] == "resident" or
                                               (k.launch_form is None and k.fused is None))}
            assert got == {(sc, t) for sc in scenarios for t in ("u8", "f32")}, \
                (s["name"], hidden)


def test_compute_streams_with_16_workers_and_light_augmentation(compute):
    stream = [k for k in timing(compute) if k.scenario == "stream"]
    assert {k.strategy for k in stream} == STREAM_STRATEGIES
    assert {(k.workers, k.prefetch, k.augment) for k in stream} == {(16, 32, "light")}
    assert all(k.workers is None for k in timing(compute) if k.scenario != "stream")


def test_compute_has_resident_at_every_configurations_form_and_step(compute, fake):
    configs = timing(compute)
    resident = {(k.transfer, k.hidden, *ran(fake, k)) for k in configs
                if k.strategy == "resident" and k.scenario == "static"}
    for k in configs:
        form, step = ran(fake, k)
        assert (k.transfer, k.hidden, form, step) in resident, k.key
    # each reference once: no two resident configurations run the same form and step
    runs = [(k.transfer, k.hidden, *ran(fake, k)) for k in configs
            if k.strategy == "resident" and k.scenario == "static"]
    assert len(runs) == len(set(runs))


def test_compute_states_its_size(compute):
    text = (MATRICES / "compute.toml").read_text()
    assert f"SIZE: {len(compute.cells):,} processes" in text
    configs = collections.Counter(k.hidden for k in timing(compute))
    for hidden, n in collections.Counter(c.hidden for c in compute.cells).items():
        label = "x".join(map(str, hidden))
        assert re.search(rf"^#   hidden {label} +{configs[hidden]} configurations x 10 = +"
                         rf"{n:,}$", text, re.M), (hidden, n)
    assert re.search(rf"^#   total\s+{len(compute.cells):,}$", text, re.M)
    assert f"{len(compute.not_runnable)} cells" in text


# --------------------------------------------------------------------------------------
# budget.toml: data larger than the device budget
# --------------------------------------------------------------------------------------
WHOLE_SET = {"resident", "um", "um-prefetch", "um-advise", "um-prefetch-coarse"}
BUDGETS = [None, 0.97, 0.54, 0.24, 0.12, 0.06]
SET_BYTES = 11 * 60000 * (784 + 4)  # resident's device footprint at u8 (ResidentStrategy)


@pytest.fixture(scope="module")
def budget(run_matrix, describe):
    return run_matrix.load_matrix(MATRICES / "budget.toml", describe)


def test_budget_runs_10_processes_of_20_steady_epochs_on_11_copies(budget):
    counts = timing(budget)
    for k, (unprofiled, profiled) in counts.items():
        assert (unprofiled, profiled) == (10, 0), k.key
        assert (k.batch, k.transfer, k.scenario, k.replicate) == (256, "u8", "static", 11), k.key
        assert k.epochs >= 21, k.key   # the decision table publishes them at batch 256
    assert {k.device_budget for k in counts} == set(BUDGETS)


def test_budget_ratios_are_what_the_file_says(budget):
    text = (MATRICES / "budget.toml").read_text()
    assert f"{SET_BYTES:,} B = {SET_BYTES / 2**30:.3f} GiB" in text
    for gib in BUDGETS[1:]:
        ratio = SET_BYTES / (gib * 2**30)
        assert re.search(rf"^#   {gib:g} GiB  ratio {ratio:.2f} ", text, re.M), gib
        fits = SET_BYTES <= gib * 2**30
        whole = {k.strategy for k in timing(budget) if k.device_budget == gib} & WHOLE_SET
        assert whole == (WHOLE_SET if fits else set()), gib   # where the set fits, they run


def test_budget_gives_every_streaming_configuration_its_floor(budget, fake, all_strategies):
    configs = timing(budget)
    streaming = {s["name"] for s in all_strategies} - WHOLE_SET
    for s in streaming:
        assert {k.device_budget for k in configs if k.strategy == s} == set(BUDGETS), s
    resident = {ran(fake, k) for k in configs
                if k.strategy == "resident" and k.device_budget is None}
    for k in configs:
        assert ran(fake, k) in resident, k.key     # resident, whole device, same form and step
    runs = [(k.device_budget, *ran(fake, k)) for k in configs if k.strategy == "resident"]
    assert len(runs) == len(set(runs))


def test_budget_states_its_size(budget):
    text = (MATRICES / "budget.toml").read_text()
    configs = timing(budget)
    assert f"SIZE: {len(budget.cells):,} processes" in text
    assert re.search(rf"^#   total\s+{len(configs)} configurations x 10 =\s+{len(budget.cells):,}$",
                     text, re.M)
    whole = sum(k.strategy in WHOLE_SET and (k.launch_form, k.fused) == (None, None)
                for k in configs)
    forms = sum(k.strategy == "resident" and (k.launch_form, k.fused) != (None, None)
                for k in configs)
    assert f"whole-set strategies (5)    x 3 budgets                     {whole} configurations" \
        in text
    assert f"resident's other forms (4)  x 3 budgets                     {forms} configurations" \
        in text
    assert len(configs) - whole - forms == 42 and "x 6 budgets                     42" in text


# --------------------------------------------------------------------------------------
# scaling.toml: data-parallel weak scaling, like with like
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scaling(run_matrix, describe):
    return run_matrix.load_matrix(MATRICES / "scaling.toml", describe)


def test_scaling_pairs_every_two_gpu_configuration_with_its_one_gpu_run(scaling, fake):
    configs = timing(scaling)
    assert set(v[1] for v in configs.values()) == {0} and set(v[0] for v in configs.values()) == {7}
    assert not scaling.not_runnable
    two = [k for k in configs if k.gpus == 2]
    one = {k for k in configs if k.gpus is None}
    weak = {dataclasses.replace(k, gpus=None, reduce=None, processes=None) for k in two}
    assert weak <= one, "every 2-GPU configuration has its 1 at the same rows per GPU"
    # strong scaling: the 2-GPU runs at 256 rows have one GPU at the same global batch, 512
    strong = {dataclasses.replace(k, gpus=None, reduce=None, processes=None, batch=512)
              for k in two if k.batch == 256}
    assert strong <= one and one == weak | strong
    assert {k.processes for k in two} == {"per-gpu"} and {k.reduce for k in two} == {None, "ring"}
    # the heavier step: 1024 rows per GPU at hidden 1024, u8
    heavy = {k for k in configs if k.batch == 1024}
    assert {(k.hidden, k.transfer) for k in heavy} == {((1024,), "u8")}
    assert {k.strategy for k in heavy} == {"resident", "pinned", "double-buffer"}
    assert all(k.hidden == (256,) for k in configs if k.batch != 1024)
    for c in scaling.cells:  # the same launch form and step on both sides
        assert ran(fake, c) == ("per-batch", "layer-by-layer"), c.key
        assert c.train_args()[-2:] == ["--graphs", "on"]


def test_scaling_states_its_size(scaling):
    text = (MATRICES / "scaling.toml").read_text()
    n = len(timing(scaling))
    assert f"= {n} configurations" in text and f"{len(scaling.cells)} processes" in text


def test_scaling4_pairs_every_four_gpu_configuration_with_a_one_gpu_run_of_scaling(
        scaling, run_matrix, describe, fake):
    s4 = run_matrix.load_matrix(MATRICES / "scaling4.toml", describe)
    configs = timing(s4)
    assert set(map(tuple, configs.values())) == {(7, 0)} and not s4.not_runnable
    four = set(configs)
    assert {(k.gpus, k.processes) for k in four} == {(4, "per-gpu")}
    one = {k for k in timing(scaling) if k.gpus is None}
    base = dict(gpus=None, reduce=None, processes=None)
    # weak: the same rows per GPU on one GPU (256, and 1024 at hidden 1024), both reductions
    weak = {k for k in four if k.batch != 128}
    assert {dataclasses.replace(k, **base) for k in weak} <= one
    assert {k.reduce for k in weak} == {None, "ring"}
    # strong: scaling.toml's global batch, 512, over 4 GPUs; ring only
    strong = {k for k in four if k.batch == 128}
    assert {dataclasses.replace(k, **base, batch=512) for k in strong} <= one
    assert {k.reduce for k in strong} == {"ring"}
    assert {k.strategy for k in strong} == {k.strategy for k in weak if k.batch == 256}
    for c in s4.cells:  # the same launch form and step as scaling.toml's runs
        assert ran(fake, c) == ("per-batch", "layer-by-layer"), c.key
        assert c.train_args()[-2:] == ["--graphs", "on"]
    text = (MATRICES / "scaling4.toml").read_text()
    assert f"= {len(configs)} configurations" in text
    assert f"{len(s4.cells)} processes" in text and f"({len(s4.cells)} runs)" in text


# --------------------------------------------------------------------------------------
# gpus.toml: every data path on 2 GPUs in one process, like with like
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpus(run_matrix, describe):
    return run_matrix.load_matrix(MATRICES / "gpus.toml", describe)


def test_gpus_runs_every_strategy_on_two_gpus_in_one_process(gpus, describe):
    configs = timing(gpus)
    # 10 unprofiled processes (a table of 20 can be ordered after Holm) and 6 profiled (the
    # reduction's time, which only they record, with an interval of 95% or more)
    assert set(map(tuple, configs.values())) == {(10, 6)}
    # processes "one" is memstrat's default: not passed, None in the cell
    assert {(k.gpus, k.reduce, k.processes) for k in configs} == {(2, "ring", None)}
    strategies = {s["name"] for s in describe["strategies"]}
    assert {k.strategy for k in configs if k.scenario == "static"} == strategies
    several_refresh = {s["name"] for s in describe["strategies"]
                       if "refresh" in s["several_gpus"]}
    assert {k.strategy for k in configs if k.scenario == "refresh"} == several_refresh
    assert {c.strategy for c, _ in gpus.not_runnable} == strategies - several_refresh
    assert {(k.transfer, k.batch, k.epochs) for k in configs} == {("u8", 256, 21)}


def test_gpus_states_its_size(gpus):
    text = (MATRICES / "gpus.toml").read_text()
    static = sum(1 for k in timing(gpus) if k.scenario == "static")
    refresh = len(timing(gpus)) - static
    assert f"{static} strategies x static + {refresh} x refresh = {len(timing(gpus))} configurations" in text
    assert f"{len(gpus.cells)} processes" in text


# --------------------------------------------------------------------------------------
# spread.toml: the run-to-run spread docs/strategies.md explains
@pytest.fixture(scope="module")
def spread(run_matrix, describe):
    return run_matrix.load_matrix(MATRICES / "spread.toml", describe)


def test_spread_gives_each_configuration_10_processes_of_20_steady_epochs(spread):
    # 20 steady epochs: analysis/spread.py's level-shift test needs MIN_HALF in each half
    assert {c.epochs for c in spread.cells} == {21}
    configs = collections.Counter(dataclasses.replace(c, repeat=0) for c in spread.cells)
    assert set(configs.values()) == {10}
    assert not spread.not_runnable


def test_spread_runs_um_advise_at_each_hint_alone_and_with_none(spread):
    hints = {c.advise for c in spread.cells if c.strategy == "um-advise" and c.profile is False
             and c.cpus is None}
    assert hints == {None, "none", "read-mostly", "preferred-device", "accessed-by"}
    assert {c.advise for c in spread.cells if c.strategy != "um-advise"} == {None}


def test_spread_states_its_size(spread):
    text = (MATRICES / "spread.toml").read_text()
    n = len({dataclasses.replace(c, repeat=0) for c in spread.cells})
    assert f"# {n} configurations x 10 processes = {len(spread.cells)}," in text
    assert f"{len(spread.cells)} processes" in (REPO / "experiments" / "scripts" /
                                                "reproduce.sh").read_text()


# The data-parallel trainer's guard: both of its forms on 2 GPUs, 7 unprofiled processes each,
# the counts its comment states.
def test_guard_gpus_times_both_forms_of_the_data_parallel_trainer(run_matrix, describe):
    guard = run_matrix.load_matrix(MATRICES / "guard_gpus.toml", describe)
    counts = timing(guard)
    assert counts and all(v == [7, 0] for v in counts.values())
    forms = collections.defaultdict(set)
    for k in counts:
        assert (k.gpus, k.reduce, k.batch, k.scenario, k.transfer) == (2, "ring", 256, "static",
                                                                        "u8"), k.key
        forms[k.processes or "one"].add(k.strategy)  # one: memstrat's default, not passed
    assert forms["one"] == {"resident", "pinned", "double-buffer", "host-shared", "peer-fanout",
                            "um-shared-prefetch"}
    assert forms["per-gpu"] == {"resident", "pinned", "double-buffer"}
    # --graphs on, memstrat's default, replays graphs in the per-gpu cells only; named, memstrat
    # refuses it in the one-process cells
    assert not any("--graphs" in c.extra_args for c in guard.cells)
    text = (MATRICES / "guard_gpus.toml").read_text()
    assert f"{len(counts)} configurations, each as 7 processes" in text
    assert f"{len(guard.cells)} processes a side" in text
    assert f"({len(guard.cells)} runs a side)" in text
