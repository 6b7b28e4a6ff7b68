"""The training step of the fast PyTorch baselines, in the two forms a skilled user reaches for:

  graph    forward + backward + SGD (momentum) captured with torch.cuda.graph, one graph per batch
           shape (the full batch and the epoch's last, partial one), replayed per batch. As the
           CUDA-graphs section of the PyTorch docs requires: warm-up iterations on a side stream
           before the capture, static input buffers, gradients that live across replays (here
           allocated once and zeroed inside the graph, so both graphs share them). The warm-up
           steps train on zeros; the parameters are restored afterwards and the momentum buffers
           zeroed, so the first replay starts from the initial weights exactly (SGD's
           buf = mu * 0 + g equals its first-step buf = g).
  compile  the whole step (forward, loss, backward, the momentum-SGD update) compiled as one graph
           under torch.compile(fullgraph=True, mode="reduce-overhead"): one CUDA graph per batch
           shape (cudagraph trees); the loss is copied out of the graph's memory after each step.
           (Compiling the forward alone, with the optimizer step compiled apart, leaves autograd
           and the optimizer's launch on the host between two graphs.)

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
    """The whole step (forward, loss, backward, the momentum-SGD update, zeroing the gradients)
    as ONE compiled graph: torch.compile(fullgraph=True, mode="reduce-overhead"), one CUDA graph
    per batch shape. Dynamo traces the backward into the graph with
    torch._dynamo.config.trace_autograd_ops; the update is SGD's own arithmetic written out
    (buf = momentum * buf + grad, p -= lr * buf: dampening 0, no Nesterov, no weight decay, as
    make_sgd builds it), because torch.optim's step breaks the graph. The momentum buffers start
    at zero, so the first step's buf = grad, as SGD's. Gradients and buffers have static
    addresses (mark_static_address), as a compiled optimizer's state has. `run(b, x, y)` per
    batch b."""

    form = "compile"

    def __init__(self, torch, model, opt, scale, n_batches: int, train_acc: bool):
        self.torch, self.scale = torch, scale
        F = torch.nn.functional
        dev = next(model.parameters()).device
        self.out = _Outputs(torch, n_batches, dev, train_acc)
        group = opt.param_groups[0]
        lr, mu = group["lr"], group["momentum"]
        if group.get("dampening", 0) or group.get("nesterov") or group.get("weight_decay", 0) \
                or len(opt.param_groups) != 1:
            raise ValueError("the compiled step writes out plain momentum SGD: one parameter "
                             "group, no dampening, Nesterov or weight decay")
        params = list(model.parameters())
        bufs = [torch.zeros_like(p) for p in params]
        for p, b in zip(params, bufs):
            p.grad = torch.zeros_like(p)
            torch._dynamo.mark_static_address(p.grad)
            torch._dynamo.mark_static_address(b)
        torch._dynamo.config.trace_autograd_ops = True
        want_acc = train_acc

        def step(x, y, scale):
            xf = x if scale is None else x.float().div(scale)
            logits = model(xf)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            with torch.no_grad():
                for p, b in zip(params, bufs):
                    b.mul_(mu).add_(p.grad)
                    p.add_(b, alpha=-lr)
                    p.grad.zero_()
            correct = (logits.argmax(1) == y).sum() if want_acc else None
            return loss.detach(), correct

        self.step = torch.compile(step, fullgraph=True, mode="reduce-overhead")

    def begin_epoch(self) -> None:
        pass

    def run(self, b: int, x, y) -> None:
        self.torch.compiler.cudagraph_mark_step_begin()
        loss, correct = self.step(x, y, self.scale)
        # the graph's outputs are overwritten by its next replay: copy them out now
        self.out.losses[b:b + 1].copy_(loss.view(1))
        if correct is not None:
            self.out.corrects[b:b + 1].copy_(correct.view(1))
