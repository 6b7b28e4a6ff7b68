#!/usr/bin/env python3
"""results_tables.py RUNS.jsonl [MALLOCS.jsonl]: Markdown tables for docs/results from the
records experiments/device_session.sh writes (run tags: accuracy, sweep-*, grid-*, overhead-*,
fused-*). Every number printed is read from a record; nothing is typed in by hand."""
import argparse
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not JSON: {e}")
    return rows


def steady(r):
    return r["epochs"][1:] or r["epochs"]


def med(r, key):
    vals = [e[key] for e in steady(r) if e.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt(v, p=2):
    return "n/a" if v is None else f"{v:.{p}f}"


def spread(r):
    s = r["summary"]
    return f"{s['wall_ms_median']:.2f} ({s['wall_ms_min']:.2f}–{s['wall_ms_max']:.2f})"


def env_line(rows):
    e = next(r["env"] for r in rows if r.get("env"))
    pcie = f"PCIe gen {e.get('pcie_gen')} x{e.get('pcie_width')}" if e.get("pcie_gen") else "PCIe n/a"
    return (f"GPU: {e['gpu_name']} (cc {e['compute_capability']}, {e['sm_count']} SMs), driver "
            f"{e.get('driver_release') or e['driver_version']}, CUDA runtime {e['runtime_version']}, "
            f"{pcie}, git {e['git_sha']}{' (dirty)' if e.get('git_dirty') else ''}")


def by_tag(rows):
    d = {}
    for r in rows:
        if r.get("status") == "ok" and r["config"].get("run_tag"):
            d[r["config"]["run_tag"]] = r
    return d


def accuracy(t):
    r = t.get("accuracy")
    if not r:
        return
    print("### Default configuration (resident, batch 256, hidden 256, u8, static, 10 epochs)\n")
    print("| epoch | wall ms | train loss | train acc % | test acc % |\n|---|---|---|---|---|")
    for e in r["epochs"]:
        print(f"| {e['epoch']} | {e['wall_ms']:.2f} | {e['train_loss']:.4f} | {100*e['train_acc']:.2f} | {100*e['test_acc']:.2f} |")
    print(f"\nFinal test accuracy **{100*r['final']['test_acc']:.2f} %**; median epoch "
          f"{spread(r)} ms (epochs 2..10), epoch 1 {r['summary']['epoch1_wall_ms']:.1f} ms.\n")


def sweep(t):
    strategies = ["resident", "pageable", "pinned", "double-buffer"]
    batches = [8, 64, 256, 1024]
    if not any(f"sweep-{s}-{b}" in t for s in strategies for b in batches):
        return
    print("### ms/epoch vs batch size (u8, static; median of epochs 2..N, min–max)\n")
    print("| strategy | " + " | ".join(f"batch {b}" for b in batches) + " |")
    print("|---|" + "---|" * len(batches))
    for s in strategies:
        if not any(f"sweep-{s}-{b}" in t for b in batches):
            continue
        cells = [spread(t[f"sweep-{s}-{b}"]) if f"sweep-{s}-{b}" in t else "—" for b in batches]
        print(f"| {s} | " + " | ".join(cells) + " |")
    print("\nEpoch 1 (warm-up: lazy module loading, per-batch graph capture, first touch), ms:\n")
    print("| strategy | " + " | ".join(f"batch {b}" for b in batches) + " |")
    print("|---|" + "---|" * len(batches))
    for s in strategies:
        if not any(f"sweep-{s}-{b}" in t for b in batches):
            continue
        cells = [fmt(t[f"sweep-{s}-{b}"]["summary"]["epoch1_wall_ms"], 1) if f"sweep-{s}-{b}" in t else "—" for b in batches]
        print(f"| {s} | " + " | ".join(cells) + " |")
    print()


def grid(t):
    strategies = ["resident", "pageable", "pinned", "double-buffer", "zero-copy", "um", "um-prefetch", "um-advise"]
    for b in (256, 1024):
        if not any(k.startswith("grid-") and k.split("-")[-3] == str(b) for k in t):
            continue
        print(f"### All strategies, batch {b}: median ms/epoch over epochs 2..N (min–max) and epoch 1\n")
        cols = [(tr, sc) for sc in ("static", "refresh") for tr in ("u8", "f32")]
        print("| strategy | " + " | ".join(f"{tr} {sc}" for tr, sc in cols) + " | " +
              " | ".join(f"ep1 {tr} {sc}" for tr, sc in cols) + " |")
        print("|---|" + "---|" * (2 * len(cols)))
        for s in strategies:
            cells, ep1 = [], []
            for tr, sc in cols:
                r = t.get(f"grid-{s}-{b}-{tr}-{sc}")
                cells.append(spread(r) if r else "—")
                ep1.append(fmt(r["summary"]["epoch1_wall_ms"], 1) if r else "—")
            print(f"| {s} | " + " | ".join(cells) + " | " + " | ".join(ep1) + " |")
        print()
        print(f"Where the time goes at batch {b} (medians of epochs 2..N, ms; UM counters from CUPTI):\n")
        print("| strategy | transfer | scenario | gpu | compute | stall | idle | host | copy | H2D MB | UM HtoD MB | GPU faults |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for s in strategies:
            for tr, sc in cols:
                r = t.get(f"grid-{s}-{b}-{tr}-{sc}")
                if not r:
                    continue
                um = med(r, "um_htod_bytes")
                print(f"| {s} | {tr} | {sc} | {fmt(med(r,'gpu_ms'))} | {fmt(med(r,'compute_ms'))} | {fmt(med(r,'stall_ms'))} | "
                      f"{fmt(med(r,'idle_ms'))} | {fmt(med(r,'host_ms'))} | {fmt(med(r,'copy_ms'))} | "
                      f"{fmt(med(r,'h2d_bytes')/1e6 if med(r,'h2d_bytes') is not None else None,1)} | "
                      f"{fmt(um/1e6 if um is not None else None,1)} | {fmt(med(r,'um_gpu_faults'),0)} |")
        print()


def overlap(t):
    rows = []
    for k, r in sorted(t.items()):
        if not (k.startswith("grid-double-buffer-") or k.startswith("grid-db")):
            continue
        parts = k.split("-")
        b, tr, sc = parts[-3], parts[-2], parts[-1]
        res = t.get(f"grid-resident-{b}-{tr}-{sc}")
        if not res:
            continue
        copy, comp, gpu = med(r, "copy_ms"), med(res, "compute_ms"), med(r, "gpu_ms")
        eff = max(copy, comp) / gpu if copy is not None and comp and gpu else None
        rows.append((int(b), tr, sc, r["config"]["depth"], copy, comp, gpu, eff))
    if not rows:
        return
    print("### double-buffer overlap efficiency = max(copy-only, compute-only) / epoch GPU time\n")
    print("copy-only = the run's own summed copy time; compute-only = resident's summed step time "
          "(same batch, transfer, scenario). 1.0 = the slower side fully hides the faster.\n")
    print("| batch | transfer | scenario | depth | copy ms | compute ms | gpu ms | efficiency |")
    print("|---|---|---|---|---|---|---|---|")
    for b, tr, sc, d, copy, comp, gpu, eff in sorted(rows):
        print(f"| {b} | {tr} | {sc} | {d} | {fmt(copy)} | {fmt(comp)} | {fmt(gpu)} | {fmt(eff, 3)} |")
    print()


def bandwidth(t):
    out = []
    for s in ("pinned", "double-buffer", "um-prefetch", "um-advise", "pageable"):
        for b in (256, 1024):
            for tr in ("u8", "f32"):
                r = t.get(f"grid-{s}-{b}-{tr}-refresh")
                if not r:
                    continue
                byt, ms = med(r, "h2d_bytes"), med(r, "copy_ms")
                if byt and ms:
                    out.append((s, b, tr, byt / 1e6, ms, byt / ms / 1e6))
    if not out:
        return
    print("### Copy / prefetch bandwidth (refresh: every byte moves every epoch)\n")
    print("Bytes the strategy moved or prefetched per epoch over the summed GPU time of its copies or "
          "prefetches (per-batch event pairs).\n")
    print("| strategy | batch | transfer | MB/epoch | copy ms | GB/s |\n|---|---|---|---|---|---|")
    for s, b, tr, mb, ms, gbs in out:
        print(f"| {s} | {b} | {tr} | {mb:.1f} | {ms:.2f} | {gbs:.1f} |")
    print()


def on_off_table(t, prefix, title, on_label, off_label, ratio_label, ratio):
    """Pairs of runs tagged <prefix><config>-on / -off: median ms/epoch of both and ratio(on, off)."""
    keys = sorted({k.rsplit("-", 1)[0] for k in t if k.startswith(prefix)})
    if not keys:
        return
    print(f"### {title}\n")
    print(f"| configuration | {on_label} | {off_label} | {ratio_label} |\n|---|---|---|---|")
    for k in keys:
        on, off = t.get(k + "-on"), t.get(k + "-off")
        if on and off:
            a, b = on["summary"]["wall_ms_median"], off["summary"]["wall_ms_median"]
            print(f"| {k[len(prefix):]} | {a:.2f} | {b:.2f} | {ratio(a, b)} |")
    print()


def overhead(t):
    on_off_table(t, "overhead-", "Profiler overhead: --profile (default) vs --no-profile, median ms/epoch",
                 "--profile", "--no-profile", "overhead", lambda a, b: f"{100*(a-b)/b:+.1f} %")


def fused(t):
    keys = sorted({k.rsplit("-", 1)[0] for k in t if k.startswith("fused-")})
    if not any(k + "-lt" in t for k in keys):  # records from before the single-launch step
        on_off_table(t, "fused-", "Fused step vs layer-by-layer (resident, u8, static), median ms/epoch",
                     "--fused on", "--fused off", "speed-up", lambda a, b: f"{b/a:.2f}x")
        return
    print("### Step implementations (resident, u8, static), median ms/epoch and µs per step\n")
    print("| configuration | single-launch | cuBLASLt fused (4-5 launches) | layer-by-layer (13) "
          "| single-launch vs best other |\n|---|---|---|---|---|")
    for k in keys:
        rs = {v: t.get(f"{k}-{v}") for v in ("on", "lt", "off")}
        if not all(rs.values()):
            continue
        steps = -(-rs["on"]["config"]["dataset"]["train_samples"] // rs["on"]["config"]["batch"])
        cell = {}
        for v, r in rs.items():
            ms = r["summary"]["wall_ms_median"]
            cell[v] = (ms, f"{ms:.2f} ({1e3 * ms / steps:.1f} µs, {r['config']['step']})")
        best_other = min(cell["lt"][0], cell["off"][0])
        print(f"| {k[len('fused-'):]} | {cell['on'][1]} | {cell['lt'][1]} | {cell['off'][1]} | "
              f"{best_other / cell['on'][0]:.2f}x |")
    print()


def tf32(t):
    keys = sorted(k for k in t if k.startswith("tf32-"))
    if not keys:
        return
    print("### TF32 tensor-core GEMMs (--tf32), median ms/epoch\n")
    print("| configuration | median ms (min–max) | epoch 1 ms | test acc % |\n|---|---|---|---|")
    for k in keys:
        r = t[k]
        print(f"| {k[len('tf32-'):]} | {spread(r)} | {r['summary']['epoch1_wall_ms']:.1f} | {100*r['final']['test_acc']:.2f} |")
    print()


def mallocs(rows):
    print("### cudaMalloc (and friends) per epoch, built-in CUPTI counters\n")
    print("| strategy | epochs | set-up cudaMalloc | set-up cudaMallocHost / HostAlloc / Managed | "
          "max cudaMalloc in any epoch | max cudaMallocAsync in any epoch | process total cudaMalloc |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("status") != "ok" or r["setup"]["api_calls"] is None:
            continue
        s = r["setup"]["api_calls"]
        ep = [e["api_calls"] or {} for e in r["epochs"]]
        print(f"| {r['config']['strategy']} | {r['config']['epochs']} | {s.get('cudaMalloc', 0)} | "
              f"{s.get('cudaMallocHost', 0)} / {s.get('cudaHostAlloc', 0)} / {s.get('cudaMallocManaged', 0)} | "
              f"{max(e.get('cudaMalloc', 0) for e in ep)} | {max(e.get('cudaMallocAsync', 0) for e in ep)} | "
              f"{(r.get('api_totals') or {}).get('cudaMalloc', 'n/a')} |")
    print()


def um_counters(rows):
    print("### Unified-memory counters per epoch (CUPTI), refresh scenario, batch 256, u8\n")
    print("| strategy | epoch | UM HtoD MB | UM DtoH MB | GPU faults | CPU faults |\n|---|---|---|---|---|---|")
    for r in rows:
        c = r["config"]
        if (r.get("status") != "ok" or c["scenario"] != "refresh" or c["batch"] != 256
                or c["transfer"] != "u8" or c["strategy"] not in ("pinned", "um", "um-prefetch", "um-advise")
                or (c["strategy"] == "double-buffer" and c["depth"] != 2)):
            continue
        for e in r["epochs"][:4]:
            g = lambda k, s=1.0, p=1: fmt(e[k] / s if e.get(k) is not None else None, p)
            print(f"| {r['config']['strategy']} | {e['epoch']} | {g('um_htod_bytes', 1e6)} | "
                  f"{g('um_dtoh_bytes', 1e6)} | {g('um_gpu_faults', 1, 0)} | {g('um_cpu_faults', 1, 0)} |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", help="JSON Lines written by device_session.sh ($OUT/runs.jsonl)")
    ap.add_argument("--mallocs", help="$OUT/mallocs.jsonl (the mallocs stage)")
    ap.add_argument("--um", help="records whose UM counters to tabulate (refresh runs)")
    a = ap.parse_args()
    rows = load(a.runs)
    print(env_line(rows) + "\n")
    t = by_tag(rows)
    for f in (accuracy, sweep, grid, overlap, bandwidth, overhead, fused, tf32):
        f(t)
    if a.mallocs:
        mallocs(load(a.mallocs))
    if a.um:
        um_counters(load(a.um))


if __name__ == "__main__":
    main()
