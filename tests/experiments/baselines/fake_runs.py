"""Records and stand-ins for the tests of the two benchmarks, without a GPU or torch.

Run records are built from the committed fixtures (memstrat's static and stream records) with
chosen epoch times; PyTorch's records are the same shape with the baselines' config keys. The
stand-ins are one script installed twice: as `memstrat` (`list`, and `train` writing a record)
and as `python` (`-c PROBE` succeeds; `python SCRIPT ARGS` writes the record pytorch_mlp.py or
pytorch_dataloader.py would write). Their epoch times are a function of the configuration and
of the repeat number at the end of the run tag, so that the processes of one configuration
differ.
"""
from __future__ import annotations

import copy
import json
import math
import re
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
STATIC = json.loads((FIXTURES / "run_record_ok.json").read_text())
STREAM = json.loads((FIXTURES / "run_record_stream.json").read_text())
FAKE_ENV = {"gpu_name": "Fake GPU", "driver_release": "999.1", "git_sha": "0123456789ab",
            "git_dirty": False}


def _with_epochs(template: dict, epochs: int, ms: float, **epoch_keys) -> dict:
    """The template with `epochs` epochs: epoch 1 three times slower (warm-up), the steady
    epochs all `ms`."""
    r = copy.deepcopy(template)
    one = r["epochs"][0]
    r["epochs"] = [dict(one, epoch=e, wall_ms=ms * (3 if e == 1 else 1), **epoch_keys)
                   for e in range(1, epochs + 1)]
    r["summary"] = dict(r["summary"], wall_ms_median=ms, epoch1_wall_ms=3 * ms,
                        steady_epochs=epochs - 1)
    r["config"]["epochs"] = epochs
    r["status"], r["error"] = "ok", None
    r["run_id"] = r["run_id"].rsplit("-", 1)[0] + "-" + uuid.uuid4().hex[:8]   # each run its own
    return r


def memstrat_record(strategy, transfer, batch, hidden, epochs, tag, ms) -> dict:
    r = _with_epochs(STATIC, epochs, ms)
    r["config"].update(strategy=strategy, transfer=transfer, batch=batch, hidden=[hidden],
                       run_tag=tag, profile=False)
    return r


def pytorch_record(mode, batch, hidden, epochs, tag, ms) -> dict:
    r = memstrat_record("pytorch-" + mode, "f32", batch, hidden, epochs, tag, ms)
    r["config"].update(framework="pytorch", mode=mode)
    r["env"] = dict(r["env"], framework="pytorch", torch_version="2.99", memstrat_version=None)
    return r


def stream_record(strategy, augment, workers, tag, ms, wait=0.0, first=0.5, batch=256,
                  epochs=3) -> dict:
    """`wait` ms of input wait beyond the first batch's `first` in every epoch."""
    r = _with_epochs(STREAM, epochs, ms, input_wait_ms=wait + first, input_wait_first_ms=first)
    r["config"].update(strategy=strategy, augment=augment, workers=workers, run_tag=tag,
                       batch=batch, prefetch=2 * workers, profile=False)
    return r


def dataloader_record(augment, workers, tag, ms, pin=True, fetch="batch", **kw) -> dict:
    r = stream_record("pytorch-dataloader", augment, workers, tag, ms, **kw)
    r["config"].update(framework="pytorch", pin_memory=pin, fetch=fetch,
                       persistent_workers=workers > 0, prefetch=None)
    return r


# ---------------------------------------------------------------------------------------------
# the stand-ins

SCRIPT = '''#!{python}
import sys
sys.path.insert(0, {here!r})
import fake_runs
sys.exit(fake_runs.fake_main(sys.argv))
'''
STRATEGIES = ("resident", "pageable", "pinned", "double-buffer", "zero-copy", "um",
              "um-prefetch", "um-advise", "um-prefetch-coarse")


def install(folder: Path) -> tuple[Path, Path]:
    """(fake memstrat, fake python) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in ("memstrat", "python"):
        p = folder / name
        p.write_text(SCRIPT.format(python=sys.executable, here=str(HERE)))
        p.chmod(0o755)
        out.append(p)
    return out[0], out[1]


def _options(args: list[str]) -> dict[str, str | bool]:
    out: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[args[i]] = args[i + 1]
            i += 2
        else:
            out[args[i]] = True
            i += 1
    return out


def fake_ms(side: str, *config) -> float:
    """A steady epoch time per configuration; the repeat number adds 2% per repeat."""
    *config, repeat = config
    base = {"memstrat": 10.0, "pytorch": 200.0, "dataloader": 300.0}[side]
    return round(base * (1 + (sum(map(ord, "".join(map(str, config)))) % 7) / 10)
                 * (1 + 0.02 * repeat), 3)


def _curve(path: str, n: int, batch: int) -> None:
    """The same loss curve from both sides: the check agrees."""
    rows = [f"1,{b},{2.3 / (1 + 0.1 * b):.9g}\n" for b in range(math.ceil(n / batch))]
    Path(path).write_text("epoch,batch,loss\n" + "".join(rows))


def fake_main(argv: list[str]) -> int:
    name = Path(argv[0]).name
    if name == "memstrat" and argv[1] == "list":
        print("\n".join(f"{s}  fake" for s in STRATEGIES))
        return 0
    if name == "python" and argv[1] == "-c":
        return 0
    script = Path(argv[1]).name if name == "python" else "memstrat"
    o = _options(argv[2:])
    tag = str(o["--run-tag"])
    m = re.search(r"-r(\d+)$", tag)
    repeat = int(m.group(1)) if m else 0
    epochs = int(o["--epochs"])
    n = int(o.get("--train-samples", 60000))
    if script == "pytorch_dataloader.py":
        aug, w = str(o["--augment"]), int(o["--workers"])
        rec = dataloader_record(aug, w, tag, fake_ms("dataloader", aug, w, repeat),
                                pin=o["--pin-memory"] == "on", fetch=str(o["--fetch"]),
                                wait=10.0, epochs=epochs)
    elif script == "pytorch_mlp.py":
        batch = o.get("--batch")
        if batch is None:  # --init: the export's batch
            batch = json.loads((Path(str(o["--init"])) / "manifest.json").read_text())["batch"]
        batch, hidden = int(batch), int(o.get("--hidden", 256))
        rec = pytorch_record(str(o["--mode"]), batch, hidden, epochs, tag,
                             fake_ms("pytorch", o["--mode"], batch, repeat))
    elif o.get("--scenario") == "stream":
        s, aug, w = str(o["--strategy"]), str(o["--augment"]), int(o["--workers"])
        rec = stream_record(s, aug, w, tag, fake_ms("memstrat", s, aug, w, repeat),
                            wait=1.0, epochs=epochs)
    else:
        s, t, batch = str(o["--strategy"]), str(o["--transfer"]), int(o["--batch"])
        rec = memstrat_record(s, t, batch, int(o["--hidden"]), epochs, tag,
                              fake_ms("memstrat", s, t, batch, repeat))
        if "--export-init" in o:
            d = Path(str(o["--export-init"]))
            d.mkdir(parents=True, exist_ok=True)
            (d / "manifest.json").write_text(json.dumps({"batch": batch}))
    rec["env"] = dict(rec["env"], **FAKE_ENV)
    if "--loss-curve" in o:
        _curve(str(o["--loss-curve"]), n, int(rec["config"]["batch"]))
    with open(str(o["--json"]), "a") as f:
        f.write(json.dumps(rec) + "\n")
    return 0
