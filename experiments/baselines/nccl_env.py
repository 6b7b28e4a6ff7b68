"""What the PyTorch anchors of several GPUs (pytorch_ddp.py, pytorch_multi_gpu_primitives.py)
check and record about NCCL, as memstrat does (common/nccl_settings.h): the refusal to start
unless NVLink multicast is off, every NCCL_* variable, and the library's version."""
from __future__ import annotations

from typing import Callable, Mapping


def nvls_refusal(environ: Mapping[str, str]) -> str | None:
    """None when NCCL_NVLS_ENABLE is "0"; else why a run on several GPUs will not start."""
    v = environ.get("NCCL_NVLS_ENABLE")
    if v == "0":
        return None
    return ("several GPUs need NVLink multicast (NVLink SHARP) off: export NCCL_NVLS_ENABLE=0 ("
            + ("it is not set" if v is None else f"it is set to '{v}'")
            + "); reductions in the NVSwitch may differ from call to call")


def nccl_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """Every NCCL_* variable (env.nccl.settings)."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith("NCCL_")}


def format_nccl_version(v) -> str | None:
    """torch.cuda.nccl.version(): a tuple (2, 27, 3), or in older torch the version code
    (X*10000 + Y*100 + Z since NCCL 2.9, X*1000 + Y*100 + Z before)."""
    if isinstance(v, (tuple, list)):
        return ".".join(str(x) for x in v[:3])
    if isinstance(v, int):
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else \
            f"{v // 1000}.{v // 100 % 10}.{v % 100}"
    return None


def nccl_at_least(version: str | None, least: tuple[int, ...] = (2, 9, 6)) -> bool:
    """NCCL >= 2.9.6 lets collectives into a CUDA graph (PyTorch's notes on CUDA graphs with
    DistributedDataParallel)."""
    if not version:
        return False
    try:
        return tuple(int(x) for x in version.split(".")[:3]) >= least
    except ValueError:
        return False


def import_torch_cuda(no_device: Callable[[str], Exception]):
    """(torch, torch.distributed) once PyTorch is installed and sees CUDA GPUs; raises
    no_device(why) otherwise. Imported here, only once a script's options are checked."""
    try:
        import torch  # noqa: PLC0415
        import torch.distributed as dist  # noqa: PLC0415
    except ImportError:
        raise no_device("PyTorch is not installed (pip install torch); this needs CUDA GPUs") \
            from None
    if not torch.cuda.is_available():
        raise no_device("torch.cuda.is_available() is False; this needs NVIDIA GPUs")
    return torch, dist
