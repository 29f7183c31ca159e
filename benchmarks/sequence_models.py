"""Sequence models, graphc vs its peers on the same weights and data, measured in one run:

- lstm train:   the word-level language model of pytorch/examples (tests/test_word_language_model.py):
                Embedding 64 -> 2-layer LSTM hidden 64 -> Linear to a 1000-word vocabulary,
                log_softmax + NLLLoss, bptt 35, batch 20, clip_grad_norm_ 0.25, a hand-written SGD
                update; graphc compiles the whole step once with the sequence length and the batch
                symbolic (``dynamic_dims``), against PyTorch eager running the same step;
- encoder train: ``nn.TransformerEncoder`` of 2 ``nn.TransformerEncoderLayer(d_model=64, nhead=4,
                dim_feedforward=128, dropout=0.0, batch_first=True)``, sequence 32, batch 16, MSE to
                a random target, ``optim.SGD``; ``gc.compile(train_step)`` vs PyTorch eager;
- encoder infer: the same encoder in eval mode: graphc's compiled plan vs PyTorch eager (under
                ``torch.no_grad()``, its own fast path) and vs onnxruntime running graphc's own ONNX
                export of the model (``gc.export(model, (x,), "m.onnx")``).

Run: .venv/bin/python benchmarks/sequence_models.py [--rounds 7] [--calls 5] [--no-profile] [--only encoder]

Every library runs on one thread (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS = 1
unless set in the environment; torch.set_num_threads and onnxruntime's intra/inter-op threads to
match): see benchmarks/control_flow.py for why interleaved calls need it on a small machine.
PyTorch's models load graphc's state dicts (the parameter names are PyTorch's). Before timing,
one step of each is run from the same weights and the largest differences are printed (training:
the loss, and the parameters after the update; inference: the output). Calls are timed in
interleaved rounds (graphc, then each peer, ``--calls`` calls per round); each column is the
median round's time per call (ms) and the ratios are graphc / peer (lower: graphc is faster).
Then the encoder plans' memory (``plan.memory_report()``: the arena, the most bytes live at once,
the activations saved for the backward pass) and the fused attention kernels' workspaces, which
the arena leaves out (one head group's weights per thread, shared by every layer and plan:
executor/kernels/attention.py). Last, ``gc.debug.profile`` of the LSTM step (``--profile
encoder``: of the encoder steps): the op kinds and nodes that take the time. Not a test: the
numbers depend on the machine and on what else runs on it; nothing is asserted.

Run only some workloads with ``--only encoder`` (or ``lstm``).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy and torch load
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

import graphc as gc  # noqa: E402
import graphc.nn.functional as gF  # noqa: E402
from graphc import nn, optim  # noqa: E402
from graphc.apps.bench_harness import blas_line, interleaved_ms, ort_status  # noqa: E402
from graphc.executor.kernels.attention import scratch_bytes  # noqa: E402

import torch  # noqa: E402

THREADS = int(os.environ["OMP_NUM_THREADS"])
torch.set_num_threads(THREADS)

NTOKENS, NINP, NHID, NLAYERS, BPTT, BATCH, CLIP, LM_LR = 1000, 64, 64, 2, 35, 20, 0.25, 5.0
D_MODEL, NHEAD, FF, SEQ, ENC_BATCH, ENC_LR = 64, 4, 128, 32, 16, 0.01


# ---- the word language model (pytorch/examples' idioms, either library) ------------------------
def rnn_model(lib, functional):
    class RNNModel(lib.Module):
        def __init__(self):
            super().__init__()
            self.encoder = lib.Embedding(NTOKENS, NINP)
            self.rnn = lib.LSTM(NINP, NHID, NLAYERS)
            self.decoder = lib.Linear(NHID, NTOKENS)

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.encoder(input), hidden)
            decoded = self.decoder(output).view(-1, NTOKENS)
            return functional.log_softmax(decoded, dim=1), hidden
    return RNNModel()


def lm_step(lib, model):
    """tests/test_word_language_model.py's step: zero_grad, loss, backward, clip, SGD by hand."""
    criterion = lib.nn.NLLLoss()

    def train_step(data, targets, hidden):
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-LM_LR)
        return loss, hidden
    return train_step


# ---- the Transformer encoder --------------------------------------------------------------------
def encoder(lib):
    layer = lib.TransformerEncoderLayer(d_model=D_MODEL, nhead=NHEAD, dim_feedforward=FF, dropout=0.0,
                                        batch_first=True)
    return lib.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def encoder_step(model, opt):
    def train_step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return train_step


def torch_twin(model, twin):
    twin.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in model.state_dict().items()})
    return twin


def state_diff(model, twin) -> float:
    """Largest |difference| between the two libraries' parameters (after a step)."""
    theirs = twin.state_dict()
    return max(float(np.abs(np.asarray(v) - theirs[k].detach().numpy()).max()) for k, v in model.state_dict().items())


def scalar(a) -> float:
    return float(np.asarray(a.detach() if hasattr(a, "detach") else a))


# ---- the three workloads: (name, {label: fn}, agreement notes, extra) ----------------------------
def lstm_train():
    rng = np.random.default_rng(0)
    data = rng.integers(0, NTOKENS, (BPTT + 1, BATCH)).astype(np.int64)
    x, y = data[:BPTT], data[1:].reshape(-1)
    gc.manual_seed(0)
    model = rnn_model(nn, gF)
    tmodel = torch_twin(model, rnn_model(torch.nn, torch.nn.functional))
    h0 = np.zeros((NLAYERS, BATCH, NHID), np.float32)
    hidden = (h0, h0.copy())
    dims = {"data": {0: "T", 1: "N"}, "targets": {0: "T*N"}, "hidden_0": {1: "N"}, "hidden_1": {1: "N"}}
    start = time.perf_counter()
    step = gc.compile(lm_step(gc, model), (x, y, hidden), dynamic_dims=dims)
    compile_s = time.perf_counter() - start
    tstep = lm_step(torch, tmodel)
    tx, ty, th = torch.from_numpy(x), torch.from_numpy(y), (torch.from_numpy(h0), torch.from_numpy(h0.copy()))

    start = time.perf_counter()
    loss, (h, c) = step(x, y, hidden)  # one step each from the same weights: the agreement check
    first_s = time.perf_counter() - start
    tloss, (th_, tc_) = tstep(tx, ty, th)
    notes = {"loss": abs(scalar(loss) - scalar(tloss)),
             "hidden": max(float(np.abs(np.asarray(a) - b.detach().numpy()).max()) for a, b in ((h, th_), (c, tc_))),
             "params after step": state_diff(model, tmodel)}
    extra = {"loss": scalar(loss), "nodes": len(step.graph.nodes),
             "scans": sum(n.op == "scan" for n in step.graph.nodes),
             "compile ms": compile_s * 1e3, "first call ms": first_s * 1e3,
             "plan": step, "inputs": (x, y, hidden)}  # as the plan is called (the profiler nests them)
    fns = {"graphc": lambda: step(x, y, hidden), "torch": lambda: tstep(tx, ty, th)}
    return "lstm LM train step", fns, notes, extra


def encoder_train():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((ENC_BATCH, SEQ, D_MODEL)).astype(np.float32)
    y = rng.standard_normal((ENC_BATCH, SEQ, D_MODEL)).astype(np.float32)
    gc.manual_seed(0)
    model = encoder(nn)
    tmodel = torch_twin(model, encoder(torch.nn))
    start = time.perf_counter()
    step = gc.compile(encoder_step(model, optim.SGD(model.parameters(), lr=ENC_LR)), (x, y))
    compile_s = time.perf_counter() - start
    tstep = encoder_step(tmodel, torch.optim.SGD(tmodel.parameters(), lr=ENC_LR))
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    start = time.perf_counter()
    loss = step(x, y)
    first_s = time.perf_counter() - start
    tloss = tstep(tx, ty)
    notes = {"loss": abs(scalar(loss) - scalar(tloss)), "params after step": state_diff(model, tmodel)}
    extra = {"loss": scalar(loss), "nodes": len(step.graph.nodes), "compile ms": compile_s * 1e3,
             "first call ms": first_s * 1e3, "plan": step, "inputs": (x, y)}
    return "encoder train step", {"graphc": lambda: step(x, y), "torch": lambda: tstep(tx, ty)}, notes, extra


def encoder_infer():
    x = np.random.default_rng(2).standard_normal((ENC_BATCH, SEQ, D_MODEL)).astype(np.float32)
    gc.manual_seed(0)
    model = encoder(nn).eval()
    tmodel = torch_twin(model, encoder(torch.nn)).eval()
    start = time.perf_counter()
    plan = gc.compile(model, (x,))
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = np.asarray(plan(x))
    first_s = time.perf_counter() - start
    tx = torch.from_numpy(x)

    def torch_infer():
        with torch.no_grad():
            return tmodel(tx)
    notes = {"out vs torch": float(np.abs(out - torch_infer().numpy()).max())}
    fns = {"graphc": lambda: plan(x), "torch": torch_infer}
    if not ort_status():
        import onnxruntime

        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "m.onnx")
            gc.export(model, (x,), path)
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = THREADS
            session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        notes["out vs onnxruntime"] = float(np.abs(out - session.run(None, {name: x})[0]).max())
        fns["onnxruntime"] = lambda: session.run(None, {name: x})
    extra = {"nodes": len(plan.graph.nodes), "compile ms": compile_s * 1e3, "first call ms": first_s * 1e3,
             "plan": plan, "inputs": (x,)}
    return "encoder inference", fns, notes, extra


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (the median is printed)")
    parser.add_argument("--calls", type=int, default=5, help="calls per round")
    parser.add_argument("--no-profile", action="store_true", help="skip gc.debug.profile")
    parser.add_argument("--profile", choices=("lstm", "encoder"), default="lstm", help="which steps to profile")
    parser.add_argument("--only", choices=("lstm", "encoder"), help="run only these workloads")
    args = parser.parse_args(argv)
    if min(args.rounds, args.calls) < 1:
        parser.error("--rounds and --calls must be at least 1")
    makers = {"lstm": (lstm_train,), "encoder": (encoder_train, encoder_infer)}
    workloads = [make() for kind, group in makers.items() if args.only in (None, kind) for make in group]

    print(f"sequence models, float32, CPU; median of {args.rounds} interleaved rounds x {args.calls} calls")
    print(blas_line() + f"; torch {torch.__version__}, {torch.get_num_threads()} threads"
          + (f"; {ort_status()}" if ort_status() else f"; onnxruntime {THREADS} thread(s)"))
    print(f"lstm: vocab {NTOKENS}, emb {NINP}, hidden {NHID} x {NLAYERS} layers, bptt {BPTT}, batch {BATCH}; "
          f"encoder: d_model {D_MODEL}, nhead {NHEAD}, ff {FF}, 2 layers, seq {SEQ}, batch {ENC_BATCH}")
    print("\nagreement (max |difference|, from the same weights and data, one step):")
    for name, _, notes, extra in workloads:
        print(f"  {name:<20} " + ", ".join(f"{k} {v:.1e}" for k, v in notes.items())
              + (f"   (graphc loss {extra['loss']:.4f})" if "loss" in extra else ""))

    rows = [(name, interleaved_ms(fns, args.rounds, args.calls)) for name, fns, _, _ in workloads]
    head = (f"\n{'workload':<20} {'graphc ms':>10} {'torch ms':>10} {'onnxrt ms':>10}"
            f" {'graphc/torch':>13} {'graphc/onnxrt':>14}")
    print(head + "\n" + "-" * (len(head) - 1))
    for name, ms in rows:
        ort = ms.get("onnxruntime")
        ort_ms, ort_ratio = (f"{ort:.3f}", f"{ms['graphc'] / ort:.2f}") if ort else ("-", "-")
        print(f"{name:<20} {ms['graphc']:>10.3f} {ms['torch']:>10.3f} {ort_ms:>10}"
              f" {ms['graphc'] / ms['torch']:>13.2f} {ort_ratio:>14}")
    print("(ratios graphc / peer: lower means graphc is faster)")

    print(f"\n{'compiling':<20} {'gc.compile ms':>14} {'first call ms':>14} {'plan nodes':>11}")
    for name, _, _, extra in workloads:
        print(f"{name:<20} {extra['compile ms']:>14.1f} {extra['first call ms']:>14.1f} {extra['nodes']:>11}"
              + (f"  ({extra['scans']} scan nodes)" if "scans" in extra else ""))

    encoders = [(name, extra) for name, _, _, extra in workloads if name.startswith("encoder")]
    if encoders:
        print(f"\n{'encoder memory':<20} {'arena':>10} {'live peak':>10} {'saved':>10}")
        for name, extra in encoders:
            report = extra["plan"].memory_report()
            saved = sum(s[2] for s in report.saved)
            print(f"{name:<20} {report.arena_bytes / 1024:>7.0f} KiB {report.live_peak_bytes / 1024:>6.0f} KiB"
                  f" {saved / 1024:>6.0f} KiB")
        print(f"(plus the attention kernels' workspaces, outside the arena: {scratch_bytes() / 1024:.0f} KiB)")

    if not args.no_profile:
        for name, _, _, extra in workloads:
            if name.startswith(args.profile):
                print(f"\ngc.debug.profile of the {name}:")
                print(gc.debug.profile(extra["plan"], *extra["inputs"], steps=10).table(limit=10))
    return 0


if __name__ == "__main__":
    sys.exit(main())
