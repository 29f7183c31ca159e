"""The fused attention core (``attention`` / ``attention_grad``, ir/ops/attention.py): what
``F.scaled_dot_product_attention`` emits, in compiled Transformer plans (printed IR, memory,
numbers against the composite path it replaced), eagerly, at symbolic lengths, split into head
groups, and exported to ONNX. The op's own forward, gradient and PyTorch rows are in the op
table (tests/op_table_grad.py)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim
from graphc.executor.kernels import attention as attention_kernels
from graphc.nn import attention as attention_module

HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None


@pytest.fixture
def composite(monkeypatch):
    """Run the block under the composite path (matmul, softmax, matmul) the op replaced."""
    def use():
        monkeypatch.setattr(attention_module, "_fusable", lambda *args: False)
    return use


def _encoder(seed=0, **kw):
    gc.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, dropout=0.0, batch_first=True, **kw)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def _ops(plan) -> list:
    return [n.op for n in plan.graph.nodes]


def test_encoder_inference_plan_has_the_fused_core_and_matches_the_composite(composite):
    x = np.random.default_rng(0).standard_normal((3, 7, 16)).astype(np.float32)
    plan = gc.compile(_encoder().eval(), (x,))
    ops = _ops(plan)
    assert ops.count("attention") == 2 and "softmax" not in ops and "matmul" not in ops
    text = str(plan.graph)
    line = next(s for s in text.splitlines() if "= attention[" in s)
    assert line.split(" = ")[0].strip().endswith(":f32[N,4,7,4]")  # the batch stays symbolic
    assert "scale=0.5" in line and "is_causal=False" in line and "self_attn (MultiheadAttention)" in line
    fused = np.asarray(plan(x))
    composite()
    plain = gc.compile(_encoder().eval(), (x,))
    assert "attention" not in _ops(plain) and "softmax" in _ops(plain)
    np.testing.assert_allclose(fused, np.asarray(plain(x)), rtol=1e-5, atol=1e-5)
    # nothing of the scores' size (N, heads, L, S) is planned any more
    assert plan.memory_report().arena_bytes < plain.memory_report().arena_bytes


def _train(model, x, y, steps=3):
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    step = gc.compile(train_step, (x, y))
    losses = [float(step(x, y)) for _ in range(steps)]
    return step, losses, {k: np.asarray(v) for k, v in model.state_dict().items()}


def test_encoder_training_plan_uses_the_fused_backward_and_matches_the_composite(composite):
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((4, 6, 16)).astype(np.float32) for _ in range(2))
    step, losses, params = _train(_encoder(norm_first=True), x, y)
    ops = _ops(step)
    assert ops.count("attention") == 2 and ops.count("attention_grad") == 2 and "softmax" not in ops
    assert "attention_grad[" in str(step.graph)
    report = step.memory_report()
    assert not any(t.endswith(",6,6]") for _, t, _, _ in report.saved), "the attention weights are not saved"
    composite()
    plain, plain_losses, plain_params = _train(_encoder(norm_first=True), x, y)
    assert "attention_grad" not in _ops(plain)
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5)
    for k, v in params.items():
        np.testing.assert_allclose(v, plain_params[k], rtol=1e-4, atol=1e-6, err_msg=k)
    assert report.arena_bytes < plain.memory_report().arena_bytes


def _sdpa_case(rng, mask_kind):
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    if mask_kind == "bool":
        mask = rng.random((5, 5)) < 0.6
        mask[2] = False  # a query that keeps no key: zeros, and zero gradients
        return q, k, v, mask
    if mask_kind == "-inf":
        mask = np.where(rng.random((2, 1, 5, 5)) < 0.4, -np.inf, rng.standard_normal((2, 1, 5, 5)))
        mask[1, 0, 3] = -np.inf
        return q, k, v, mask
    return q, k, v, None


@pytest.mark.parametrize("mask_kind, causal", [(None, False), (None, True), ("bool", False), ("-inf", False)])
def test_eager_sdpa_values_and_gradients_match_the_composite(composite, mask_kind, causal):
    """Eager tensors run the same kernels (dispatch -> run_node) and the same vjp (the tape)."""
    def run():
        q, k, v, mask = _sdpa_case(np.random.default_rng(2), mask_kind)
        ts = [gc.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(*ts, attn_mask=None if mask is None else gc.tensor(mask),
                                             is_causal=causal)
        (out * gc.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape))).sum().backward()
        return [out.numpy()] + [t.grad.numpy() for t in ts]
    fused = run()
    composite()
    for a, b in zip(fused, run()):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_sdpa_falls_back_where_the_op_does_not_apply():
    q, k, v = gc.randn(2, 3, 5, 4), gc.randn(3, 6, 4), gc.randn(3, 6, 2)  # key/value broadcast over the batch
    assert F.scaled_dot_product_attention(q, k, v).shape == (2, 3, 5, 2)

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)  # dropout: the composite path
    plan = gc.compile(fn, tuple(np.ones((2, 3, 5, 4), np.float32) for _ in range(3)))
    assert "attention" not in _ops(plan) and "dropout" in _ops(plan)


def test_symbolic_lengths_pass_through_and_causal_needs_no_fixed_length():
    """The shape rule keeps N and T; is_causal on a symbolic length (the composite path needed it
    fixed) builds its mask in the kernel at each length."""
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    rng = np.random.default_rng(3)
    example = tuple(rng.standard_normal((2, 2, 5, 4)).astype(np.float32) for _ in range(3))
    plan = gc.compile(fn, example, dynamic_dims={i: {0: "N", 2: "T"} for i in range(3)})
    node = next(n for n in plan.graph.nodes if n.op == "attention")
    assert str(node.outputs[0].type) == "f32[N,2,T,4]"
    for length in (5, 9):
        q, k, v = (rng.standard_normal((3, 2, length, 4)).astype(np.float32) for _ in range(3))
        eager = F.scaled_dot_product_attention(gc.tensor(q), gc.tensor(k), gc.tensor(v), is_causal=True)
        np.testing.assert_allclose(np.asarray(plan(q, k, v)), eager.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("block", [1, 40, 100])
def test_head_groups_give_the_same_numbers(monkeypatch, block):
    """A budget below one head's scores takes one head per group; others split the head axis."""
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((3, 4, 5, 2)), rng.standard_normal((3, 4, 6, 2)), rng.standard_normal((3, 4, 6, 3))
    mask = rng.standard_normal((3, 1, 1, 6))
    ts = [gc.tensor(a, requires_grad=True) for a in (q, k, v, mask)]
    whole = F.scaled_dot_product_attention(*ts[:3], attn_mask=ts[3])
    whole.sum().backward()
    expected = [whole.numpy()] + [t.grad.numpy() for t in ts]
    monkeypatch.setattr(attention_kernels, "HOST_BLOCK", block)
    ts = [gc.tensor(a, requires_grad=True) for a in (q, k, v, mask)]
    split = F.scaled_dot_product_attention(*ts[:3], attn_mask=ts[3])
    split.sum().backward()
    for a, b in zip([split.numpy()] + [t.grad.numpy() for t in ts], expected):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (CI installs it)")
@pytest.mark.parametrize("kind", ["causal", "bool", "float"])
def test_onnx_export_of_the_fused_core_runs_in_onnxruntime(tmp_path, kind):
    import onnxruntime

    rng = np.random.default_rng(5)
    keep = rng.random((6, 6)) < 0.6
    keep[1] = False
    add = np.where(keep, rng.standard_normal((6, 6)), -np.inf).astype(np.float32)

    class Core(nn.Module):
        def forward(self, q, k, v):
            if kind == "causal":
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep if kind == "bool" else add)
    example = tuple(rng.standard_normal((2, 3, 6, 4)).astype(np.float32) for _ in range(3))
    path = tmp_path / "core.onnx"
    dims = {i: {0: "N", 2: "T"} for i in range(3)} if kind == "causal" else None
    plan = gc.export(Core(), example, path, dynamic_dims=dims)
    assert "attention" in _ops(plan)
    session = onnxruntime.InferenceSession(str(path))
    names = [i.name for i in session.get_inputs()]
    for length in ((6, 9) if kind == "causal" else (6,)):
        ins = tuple(rng.standard_normal((2, 3, length, 4)).astype(np.float32) for _ in range(3))
        got = session.run(None, dict(zip(names, ins)))[0]
        np.testing.assert_allclose(got, np.asarray(plan(*ins)), rtol=1e-5, atol=1e-6)
