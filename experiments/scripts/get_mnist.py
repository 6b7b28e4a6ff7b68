#!/usr/bin/env python3
"""get_mnist.py: put the four MNIST IDX files (gzip) into memstrat's data directory,
every file verified against the SHA-256 sums committed beside this script.

Where the data comes from, first success wins:
  1. a local copy, when --from DIR names one;
  2. a download from public mirrors (--mirror overrides them);
  3. when no MNIST can be had: Fashion-MNIST from Debian's dataset-fashion-mnist package
     (same IDX format and sizes; installed with apt-get when running as root). The
     directory then gets a DATASET file saying "fashion-mnist", so memstrat records which
     data set a run used. --no-fallback turns this off, --fashion asks for it directly.

Where it goes, first given wins: --data DIR, $MEMSTRAT_DATA, <repo>/data/mnist (the
places the memstrat binary looks, in the same order).

Files already present and verified are kept, so running it twice costs nothing.
Exit status: 0 when the directory holds a verified data set, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FILES = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]
MIRRORS = [
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
]
FASHION_PACKAGE = "dataset-fashion-mnist"
FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")  # where the package puts them
MAX_DOWNLOAD = 64 << 20  # the largest MNIST file is 9.9 MB; refuse runaway responses
MARKER = "DATASET"  # read by common/mnist.cpp to name the data set
FIX = ("fix: copy the four MNIST .gz files into a directory and pass --from DIR, or run where "
       "the network reaches a mirror (see --mirror)")


class Failure(Exception):
    """A step that could not provide the data; the message says why."""


def say(msg: str) -> None:
    print(f"get_mnist: {msg}", flush=True)


def read_sums(path: Path) -> dict[str, str]:
    sums = {}
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                digest, name = line.split()
            except ValueError:
                raise Failure(f"{path}: malformed line {line!r} (expected '<sha256>  <file>')")
            sums[name.lstrip("*")] = digest.lower()
    missing = [f for f in FILES if f not in sums]
    if missing:
        raise Failure(f"{path} has no sum for {', '.join(missing)}")
    return sums


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verified(path: Path, digest: str) -> bool:
    return path.is_file() and sha256(path) == digest


class Staging:
    """Collects verified files in a hidden folder inside the target and moves them in
    together at the end, so a failure half-way leaves the target as it was (never a mix
    of two data sets, which have the same shapes and would load without complaint)."""

    def __init__(self, target: Path):
        self.target = target
        self.dir = Path(tempfile.mkdtemp(prefix=".incoming-", dir=target))
        self.names: list[str] = []

    def add(self, name: str, digest: str, fill) -> None:
        """`fill(path)` writes the file; it is kept only if its SHA-256 is `digest`."""
        path = self.dir / name
        fill(path)
        got = sha256(path)
        if got != digest:
            raise Failure(f"{name}: SHA-256 mismatch (got {got}, expected {digest})")
        path.chmod(0o644)
        self.names.append(name)

    def commit(self) -> None:
        for name in self.names:
            os.replace(self.dir / name, self.target / name)

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def missing(target: Path, sums: dict[str, str]) -> list[str]:
    """The files still needed in target (absent or failing their sum)."""
    return [f for f in FILES if not verified(target / f, sums[f])]


def from_local(source: Path, target: Path, sums: dict[str, str]) -> None:
    if not source.is_dir():
        raise Failure(f"{source}: no such directory")
    with Staging(target) as stage:
        for name in missing(target, sums):
            src = source / name
            if not src.is_file():
                raise Failure(f"{src}: missing")
            stage.add(name, sums[name], lambda tmp, s=src: shutil.copyfile(s, tmp))
        stage.commit()


def download(url: str, dest: Path, timeout: float) -> None:
    req = urllib.request.Request(url, headers={"User-Agent": "memstrat-get_mnist"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp, open(dest, "wb") as out:
            total = 0
            while True:
                block = resp.read(1 << 16)
                if not block:
                    break
                total += len(block)
                if total > MAX_DOWNLOAD:
                    raise Failure(f"{url}: response larger than {MAX_DOWNLOAD} bytes")
                out.write(block)
    except (OSError, ValueError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise Failure(f"{url}: {reason}") from None


def from_mirrors(mirrors: list[str], target: Path, sums: dict[str, str], timeout: float) -> str:
    used = set()
    with Staging(target) as stage:
        for name in missing(target, sums):
            errors = []
            for mirror in mirrors:
                url = mirror.rstrip("/") + "/" + name
                say(f"downloading {url}")
                try:
                    stage.add(name, sums[name], lambda tmp, u=url: download(u, tmp, timeout))
                    used.add(mirror)
                    break
                except Failure as e:
                    errors.append(str(e))
                    say(f"  failed: {e}")
            else:
                raise Failure(f"{name} could not be downloaded from any mirror:\n    " +
                              "\n    ".join(errors))
        stage.commit()
    return ", ".join(sorted(used)) or "(nothing to download)"


def fashion_source() -> Path:
    """The directory holding the Debian package's files, installing the package if needed."""
    def package_dir() -> Path | None:
        try:
            listing = subprocess.run(["dpkg", "-L", FASHION_PACKAGE], capture_output=True,
                                     text=True, check=False).stdout.split()
        except FileNotFoundError:
            listing = []
        for line in listing:
            if line.endswith("/" + FILES[0]):
                return Path(line).parent
        return FASHION_DIR if all((FASHION_DIR / f).is_file() for f in FILES) else None

    found = package_dir()
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise Failure(f"Debian package {FASHION_PACKAGE} is not installed; install it with "
                      f"'sudo apt-get install {FASHION_PACKAGE}' and run this again")
    say(f"installing Debian package {FASHION_PACKAGE} (apt-get install -y)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", FASHION_PACKAGE]
    if subprocess.run(cmd, env=env, check=False).returncode != 0:
        say("apt-get install failed; refreshing the package lists (apt-get update) and retrying")
        subprocess.run(["apt-get", "update"], env=env, check=False)
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            raise Failure(f"apt-get install {FASHION_PACKAGE} failed")
    found = package_dir()
    if not found:
        raise Failure(f"{FASHION_PACKAGE} is installed but its IDX files were not found")
    return found


def set_marker(target: Path, name: str) -> None:
    """Makes the DATASET marker agree with the files. MNIST needs none (it is the default)
    unless the directory's name contains "fashion", which alone would say Fashion-MNIST."""
    marker = target / MARKER
    current = marker.read_text().split()[:1] if marker.is_file() else []
    needed = name == "fashion-mnist" or "fashion" in target.name.lower() or current
    if needed and current != [name]:
        try:
            marker.write_text(name + "\n")
        except OSError as e:
            raise Failure(f"cannot write {marker}: {e}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Provide the MNIST IDX files (gzip) in memstrat's data directory,\n"
                    "verified against experiments/scripts/mnist.sha256. Sources, in order: --from DIR,\n"
                    "public mirrors, then Fashion-MNIST from Debian.",
        epilog="Examples:\n"
               "  experiments/scripts/get_mnist.py                    # into <repo>/data/mnist\n"
               "  experiments/scripts/get_mnist.py --data /scratch/mnist\n"
               "  experiments/scripts/get_mnist.py --from ~/Downloads/mnist\n"
               "Then: build/memstrat train --data DIR ... (or set MEMSTRAT_DATA=DIR).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", metavar="DIR",
                   help="target directory (default: $MEMSTRAT_DATA, else <repo>/data/mnist)")
    p.add_argument("--from", dest="source", metavar="DIR",
                   help="copy the four .gz files from DIR instead of downloading")
    p.add_argument("--mirror", action="append", metavar="URL",
                   help="download base URL (repeatable; default: " + ", ".join(MIRRORS) + ")")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="network timeout per request in seconds (default 30)")
    p.add_argument("--fashion", action="store_true",
                   help="use Fashion-MNIST from Debian's dataset-fashion-mnist package directly")
    p.add_argument("--no-fallback", action="store_true",
                   help="fail instead of falling back to Fashion-MNIST when MNIST is unavailable")
    args = p.parse_args(argv)
    try:
        return provide(args)
    except (Failure, OSError) as e:
        say(f"error: {e}")
        return 1
    except KeyboardInterrupt:
        say("interrupted; the target directory was left as it was")
        return 1


def provide(args: argparse.Namespace) -> int:
    if args.data:
        target, why = Path(args.data), "--data"
    elif os.environ.get("MEMSTRAT_DATA"):
        target, why = Path(os.environ["MEMSTRAT_DATA"]), "MEMSTRAT_DATA"
    else:
        target, why = REPO / "data" / "mnist", "default"
    target = target.expanduser().resolve()
    say(f"target directory: {target} ({why})")

    mnist_sums = read_sums(HERE / "mnist.sha256")
    fashion_sums = read_sums(HERE / "fashion-mnist.sha256")
    target.mkdir(parents=True, exist_ok=True)

    attempts: list[str] = []
    if not args.fashion:
        if not missing(target, mnist_sums):
            set_marker(target, "mnist")
            say(f"MNIST already present and verified in {target}")
            return 0
        # 1. a local copy
        if args.source:
            local = Path(args.source).expanduser()
            try:
                from_local(local, target, mnist_sums)
                set_marker(target, "mnist")
                say(f"MNIST copied from {local.resolve()} into {target} (SHA-256 verified)")
                return 0
            except (Failure, OSError) as e:  # an explicit source that fails is the user's answer
                say(f"could not copy from {local}: {e}")
                say("error: --from was given, so nothing else is tried")
                return 1
        # 2. mirrors
        try:
            used = from_mirrors(args.mirror or MIRRORS, target, mnist_sums, args.timeout)
            set_marker(target, "mnist")
            say(f"MNIST downloaded from {used} into {target} (SHA-256 verified)")
            return 0
        except (Failure, OSError) as e:
            attempts.append(f"download: {e}")
            say(f"could not download MNIST: {e}")
        if args.no_fallback:
            say("error: no MNIST could be obtained, and --no-fallback forbids Fashion-MNIST")
            say(FIX)
            return 1

    # 3. Fashion-MNIST from the Debian package
    if not args.fashion:
        say("MNIST is unavailable; falling back to Fashion-MNIST")
    try:
        if missing(target, fashion_sums):
            src = fashion_source()
            from_local(src, target, fashion_sums)
        else:
            src = target
            say(f"Fashion-MNIST already present and verified in {target}")
        set_marker(target, "fashion-mnist")
    except (Failure, OSError) as e:
        attempts.append(f"Fashion-MNIST: {e}")
        say("error: no data set could be provided:\n  " + "\n  ".join(attempts))
        say(FIX)
        return 1
    say("*" * 72)
    say(f"USING FASHION-MNIST, NOT MNIST (from {src}, Debian package {FASHION_PACKAGE}).")
    say("Same format and sizes, 10 clothing classes; accuracies are lower than MNIST's.")
    say(f"{target}/{MARKER} says 'fashion-mnist', so runs record dataset=fashion-mnist.")
    say("*" * 72)
    return 0


if __name__ == "__main__":
    sys.exit(main())
