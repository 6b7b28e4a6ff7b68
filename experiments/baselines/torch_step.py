"""The training step of the fast PyTorch baselines, in the two forms a skilled user reaches for:

  graph    forward + backward + SGD (momentum) captured with torch.cuda.graph, one graph per batch
           shape (the full batch and the epoch's last, partial one), replayed per batch. As the
           CUDA-graphs section of the PyTorch docs requires: warm-up iterations on a side stream
           before the capture, static input buffers, gradients that live across replays (here
           allocated once and zeroed inside the graph, so both graphs share them). The warm-up
           steps train on zeros; the parameters are restored afterwards and the momentum buffers
           zeroed, so the first replay starts from the initial weights exactly (SGD's
           buf = mu * 0 + g equals its first-step buf = g).
  compile  the model's forward + loss under torch.compile(mode="reduce-overhead") (CUDA graphs of
           the compiled forward and backward, cudagraph trees) and the optimizer step under
           torch.compile; the loss is copied out of the graph's memory after each step.

Both keep each batch's loss (and with train_acc the correct count) in device buffers indexed by
the batch: no host synchronisation inside an epoch. The math is eager PyTorch's (graph) or
Inductor's fused kernels (compile, which may contract multiply-adds: its curve agrees within
rounding, not bit for bit).
"""
from __future__ import annotations

import inspect

STEP_FORMS = ("graph", "compile")
WARMUP_STEPS = 3  # the docs' example: a few eager iterations on a side stream before capture


def make_sgd(torch, model, lr: float, momentum: float):
    """SGD as the eager baselines build it; capturable=True where this torch's SGD has it."""
    kw = {"capturable": True} if "capturable" in inspect.signature(torch.optim.SGD).parameters \
        else {}
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, **kw)


class _Outputs:
    """Per-batch loss (and correct count) of an epoch, on the device."""

    def __init__(self, torch, n_batches: int, device, train_acc: bool):
        self.torch = torch
        self.losses = torch.zeros(n_batches, dtype=torch.float32, device=device)
        self.corrects = torch.zeros(n_batches, dtype=torch.int64, device=device) \
            if train_acc else None

    def lists(self) -> tuple[list, list]:
        """RunLog.end_epoch's per-batch tensor lists (after the timed region)."""
        return list(self.losses.unbind()), \
            list(self.corrects.unbind()) if self.corrects is not None else []


class GraphStep:
    """One CUDA graph of the whole step per batch shape; `capture(name, inputs)` with a function
    returning the (x, y) the step reads (static tensors, or ops on them that the graph should
    contain), `replay(name)` per batch, `begin_epoch()` before the epoch's first replay."""

    form = "graph"

    def __init__(self, torch, model, opt, scale, n_batches: int, train_acc: bool):
        self.torch, self.model, self.opt, self.scale = torch, model, opt, scale
        self.F = torch.nn.functional
        dev = next(model.parameters()).device
        self.out = _Outputs(torch, n_batches, dev, train_acc)
        self.idx = torch.zeros(1, dtype=torch.int64, device=dev)  # the batch, advanced in-graph
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        self.graphs: dict[str, object] = {}

    def _body(self, x, y) -> None:
        self.opt.zero_grad(set_to_none=False)
        xf = x if self.scale is None else x.float().div(self.scale)
        logits = self.model(xf)
        loss = self.F.cross_entropy(logits, y)
        loss.backward()
        self.opt.step()
        self.out.losses.index_copy_(0, self.idx, loss.detach().view(1))
        if self.out.corrects is not None:
            self.out.corrects.index_copy_(0, self.idx, (logits.argmax(1) == y).sum().view(1))
        self.idx.add_(1)

    def capture(self, name: str, inputs) -> None:
        torch = self.torch
        params = [p.detach().clone() for p in self.model.parameters()]
        self.idx.zero_()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                # each warm-up step at batch 0: the body advances the index, and an epoch may
                # have fewer (full) batches than there are warm-up steps
                self.idx.zero_()
                self._body(*inputs())
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            self._body(*inputs())
        with torch.no_grad():
            for p, p0 in zip(self.model.parameters(), params):
                p.copy_(p0)
                p.grad.zero_()
                buf = self.opt.state.get(p, {}).get("momentum_buffer")
                if buf is None:
                    raise RuntimeError("SGD made no momentum buffer in the warm-up steps")
                buf.zero_()
        self.idx.zero_()
        torch.cuda.synchronize()
        self.graphs[name] = g

    def begin_epoch(self) -> None:
        self.idx.zero_()

    def replay(self, name: str) -> None:
        self.graphs[name].replay()


class CompiledStep:
    """torch.compile(mode="reduce-overhead") of forward + loss, a compiled optimizer step;
    `run(b, x, y)` per batch b."""

    form = "compile"

    def __init__(self, torch, model, opt, scale, n_batches: int, train_acc: bool):
        self.torch, self.opt, self.scale = torch, opt, scale
        F = torch.nn.functional
        dev = next(model.parameters()).device
        self.out = _Outputs(torch, n_batches, dev, train_acc)
        want_acc = train_acc

        def forward(x, y, scale):
            xf = x if scale is None else x.float().div(scale)
            logits = model(xf)
            correct = (logits.argmax(1) == y).sum() if want_acc else None
            return F.cross_entropy(logits, y), correct

        self.forward = torch.compile(forward, mode="reduce-overhead")
        self.opt_step = torch.compile(opt.step)

    def begin_epoch(self) -> None:
        pass

    def run(self, b: int, x, y) -> None:
        self.torch.compiler.cudagraph_mark_step_begin()
        loss, correct = self.forward(x, y, self.scale)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt_step()
        # the graph's outputs are overwritten by its next replay: copy them out now
        self.out.losses[b:b + 1].copy_(loss.detach().view(1))
        if correct is not None:
            self.out.corrects[b:b + 1].copy_(correct.view(1))
