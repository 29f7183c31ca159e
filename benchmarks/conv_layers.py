"""Convolution layers beyond Conv2d, graphc vs PyTorch eager on the same weights and data, one run:

- convtranspose2d: ``nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1)`` (a DCGAN generator
                   block) on a 16 x 64 x 16 x 16 batch -> 16 x 32 x 32 x 32;
- conv2d reflect:  ``nn.Conv2d(32, 32, 3, padding=1, padding_mode="reflect")`` on 16 x 32 x 32 x 32
                   (the style-transfer / pix2pix idiom: an explicit pad, then the conv);
- conv1d:          ``nn.Conv1d(64, 64, 5, padding=2)`` on 16 x 64 x 256.

Each workload is one training step of the layer alone: forward, MSE to a random target,
backward and an SGD update (lr 0.01): graphc compiles it once (``gc.compile(model, loss_fn=,
optimizer=)``), PyTorch runs it eagerly (zero_grad, forward, loss, backward, step). Before
timing, one step of each from the same weights gives the agreement line (loss and parameters).

Run: .venv/bin/python benchmarks/conv_layers.py [--rounds 7] [--calls 5]

Every library runs on one thread (OMP/OPENBLAS/MKL_NUM_THREADS = 1 unless set, and
torch.set_num_threads). Calls are timed in interleaved rounds (graphc, then torch, ``--calls``
calls per round); each column is the median round's time per call (ms) and the ratio is
graphc / torch (lower: graphc is faster). Not a test: nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy and torch load
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

import graphc as gc  # noqa: E402
from graphc import nn, optim  # noqa: E402
from graphc.apps.bench_harness import blas_line, interleaved_ms  # noqa: E402

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
LR = 0.01

WORKLOADS = {
    "convtranspose2d": (lambda m: m.ConvTranspose2d(64, 32, 4, stride=2, padding=1), (16, 64, 16, 16)),
    "conv2d reflect": (lambda m: m.Conv2d(32, 32, 3, padding=1, padding_mode="reflect"), (16, 32, 32, 32)),
    "conv1d": (lambda m: m.Conv1d(64, 64, 5, padding=2), (16, 64, 256)),
}


def workload(name):
    make, shape = WORKLOADS[name]
    gc.manual_seed(0)
    model = make(nn)
    twin = make(torch.nn)
    twin.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(tuple(twin(torch.from_numpy(x)).shape)).astype(np.float32)
    start = time.perf_counter()
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=LR))
    compile_ms = (time.perf_counter() - start) * 1e3
    topt = torch.optim.SGD(twin.parameters(), lr=LR)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def torch_step():
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(twin(tx), ty)
        loss.backward()
        topt.step()
        return loss

    loss, tloss = float(step(x, y)), float(torch_step().detach())
    params = max(float(np.abs(np.asarray(v) - twin.state_dict()[k].numpy()).max())
                 for k, v in model.state_dict().items())
    notes = {"loss": abs(loss - tloss), "params after step": params, "compile ms": compile_ms,
             "nodes": " ".join(n.op for n in step.graph.nodes if "conv" in n.op or n.op in ("concat", "slice"))}
    return {"graphc": lambda: step(x, y), "torch": torch_step}, notes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (the median is printed)")
    parser.add_argument("--calls", type=int, default=5, help="calls per round")
    args = parser.parse_args(argv)
    if min(args.rounds, args.calls) < 1:
        parser.error("--rounds and --calls must be at least 1")
    print(f"conv layers, float32, CPU, one training step (forward + backward + SGD); median of {args.rounds} "
          f"interleaved rounds x {args.calls} calls")
    print(blas_line() + f"; torch {torch.__version__}, {torch.get_num_threads()} threads")
    built = {name: workload(name) for name in WORKLOADS}
    print("\nagreement (max |difference| after one step from the same weights and data):")
    for name, (_, notes) in built.items():
        print(f"  {name:<16} loss {notes['loss']:.1e}, params {notes['params after step']:.1e}; "
              f"compile {notes['compile ms']:.0f} ms; conv nodes: {notes['nodes']}")
    head = f"\n{'workload':<16} {'graphc ms':>10} {'torch ms':>10} {'graphc/torch':>13}"
    print(head + "\n" + "-" * (len(head) - 1))
    for name, (fns, _) in built.items():
        ms = interleaved_ms(fns, args.rounds, args.calls)
        print(f"{name:<16} {ms['graphc']:>10.3f} {ms['torch']:>10.3f} {ms['graphc'] / ms['torch']:>13.2f}")
    print("(graphc / torch: lower means graphc is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
