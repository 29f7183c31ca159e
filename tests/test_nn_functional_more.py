"""The functions of graphc/nn/losses_more.py, functional_more.py, functional_embedding.py,
functional_attention.py, graphc/masked.py and graphc/ops/aten.py against PyTorch in float64:
forward values and the gradients of ``sum(out * w)`` for a seeded ``w``; compiled plans against
eager calls; and the refusals.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def rng():
    return np.random.default_rng(7)


def _randn(*shape):
    return rng().standard_normal(shape)


def _sign(*shape):
    return np.where(rng().standard_normal(shape) > 0, 1.0, -1.0)


def _ints(high, *shape):
    return rng().integers(0, high, shape).astype(np.int64)


class Const(np.ndarray):
    """An input that is not differentiated (a target PyTorch refuses a gradient for)."""


def _const(a):
    return np.asarray(a).view(Const)


def _diff(a):
    return a.dtype == np.float64 and not isinstance(a, Const)


def _mask(*shape):
    m = rng().random(shape) > 0.4
    m.reshape(-1)[0] = True
    return m


# (id, graphc callable, torch callable, inputs (arrays; floats differentiated), kwargs)
CASES = [
    ("cosine_embedding", F.cosine_embedding_loss, TF.cosine_embedding_loss, [_randn(4, 3), _randn(4, 3) + 1, _sign(4)],
     {"margin": 0.2}),
    ("gaussian_nll", F.gaussian_nll_loss, TF.gaussian_nll_loss, [_randn(4, 3), _randn(4, 3) + 1,
                                                                 rng().random((4, 1)) + 0.1], {"full": True}),
    ("hinge_embedding", F.hinge_embedding_loss, TF.hinge_embedding_loss, [_randn(5), _sign(5)], {"reduction": "sum"}),
    ("margin_ranking", F.margin_ranking_loss, TF.margin_ranking_loss, [_randn(5), _randn(5) + 0.3, _sign(5)],
     {"margin": 0.1}),
    ("multi_margin", F.multi_margin_loss, TF.multi_margin_loss, [_randn(4, 5), _ints(5, 4)], {"p": 2, "margin": 0.7}),
    ("multi_margin_weight", F.multi_margin_loss, TF.multi_margin_loss, [_randn(4, 5), _ints(5, 4)],
     {"weight": rng().random(5)}),
    ("multilabel_margin", F.multilabel_margin_loss, TF.multilabel_margin_loss,
     [_randn(2, 4), np.array([[3, 0, -1, 1], [1, 2, 2, 0]])], {"reduction": "none"}),
    ("multilabel_soft_margin", F.multilabel_soft_margin_loss, TF.multilabel_soft_margin_loss,
     [_randn(3, 4), (_randn(3, 4) > 0).astype(float)], {}),
    ("poisson_nll", F.poisson_nll_loss, TF.poisson_nll_loss, [_randn(6), rng().random(6) * 4], {"full": True}),
    ("poisson_nll_rate", F.poisson_nll_loss, TF.poisson_nll_loss, [rng().random(6) + 0.1, rng().random(6) * 4],
     {"log_input": False}),
    ("soft_margin", F.soft_margin_loss, TF.soft_margin_loss, [_randn(6), _const(_sign(6))], {}),
    ("triplet", F.triplet_margin_loss, TF.triplet_margin_loss, [_randn(4, 3), _randn(4, 3) * 2, _randn(4, 3) * 1.5],
     {"swap": True, "p": 3}),
    ("linear_cross_entropy", F.linear_cross_entropy, TF.linear_cross_entropy, [_randn(4, 3), _randn(5, 3),
                                                                                _ints(5, 4)], {}),
    ("glu", F.glu, TF.glu, [_randn(3, 4)], {"dim": 1}),
    ("hardshrink", F.hardshrink, TF.hardshrink, [_randn(7)], {"lambd": 0.3}),
    ("softshrink", F.softshrink, TF.softshrink, [_randn(7)], {"lambd": 0.3}),
    ("rrelu_eval", F.rrelu, TF.rrelu, [_randn(7)], {}),
    ("cosine_similarity", F.cosine_similarity, TF.cosine_similarity, [_randn(4, 3), _randn(1, 3)], {}),
    ("pairwise_distance", F.pairwise_distance, TF.pairwise_distance, [_randn(4, 3), _randn(4, 3)], {"p": 1.5}),
    ("pdist", F.pdist, TF.pdist, [_randn(4, 3)], {}),
    ("bilinear", F.bilinear, TF.bilinear, [_randn(4, 3), _randn(4, 2), _randn(5, 3, 2), _randn(5)], {}),
    ("channel_shuffle", F.channel_shuffle, TF.channel_shuffle, [_randn(2, 6, 3)], {"groups": 3}),
    ("rms_norm", F.rms_norm, TF.rms_norm, [_randn(2, 3, 4), (3, 4), _randn(3, 4)], {}),
    ("embedding_bag_offsets", lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
     lambda w, i, o, p: TF.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
     [_randn(6, 3), _ints(6, 7), np.array([0, 0, 3]), _randn(7)], {}),
    ("embedding_bag_max", lambda w, i: F.embedding_bag(i, w, mode="max"), lambda w, i: TF.embedding_bag(i, w, mode="max"),
     [_randn(6, 3), np.array([[0, 2, 5], [1, 1, 4]])], {}),
    ("embedding_bag_mean_pad", lambda w, i, o: F.embedding_bag(i, w, o, padding_idx=2),
     lambda w, i, o: TF.embedding_bag(i, w, o, padding_idx=2), [_randn(6, 3), np.array([2, 1, 2, 2, 3]),
                                                                   np.array([0, 2, 3])], {}),
    ("native_layer_norm", gc.native_layer_norm, torch.native_layer_norm,
     [_randn(2, 3, 4), (3, 4), _randn(3, 4), _randn(3, 4), 1e-5], {}),
    ("grid_sampler_2d", gc.grid_sampler_2d, torch.grid_sampler_2d, [_randn(1, 2, 4, 5), rng().random((1, 3, 2, 2)) * 2 - 1,
                                                                    0, 1, False], {}),
    ("safe_softmax", gc.ops.aten._safe_softmax, torch.ops.aten._safe_softmax,
     [np.array([[-np.inf, -np.inf], [0.5, -1.0]]), 1], {}),
]
for _name in ("sum", "prod", "amax", "amin", "mean", "logsumexp", "var", "std"):
    CASES.append((f"masked.{_name}", getattr(gc.masked, _name), getattr(torch.masked, _name),
                  [_randn(3, 4)], {"dim": 1, "mask": _mask(3, 4)}))
for _name in ("cumsum", "cumprod", "softmax", "log_softmax", "softmin", "median"):
    CASES.append((f"masked.{_name}", getattr(gc.masked, _name), getattr(torch.masked, _name),
                  [_randn(3, 4), 1], {"mask": _mask(3, 4)}))
CASES.append(("masked.norm", gc.masked.norm, torch.masked.norm, [_randn(3, 4), 3.0, 1], {"mask": _mask(1, 4)}))
CASES.append(("masked.normalize", gc.masked.normalize, torch.masked.normalize, [_randn(3, 4), 2.0, 0],
              {"mask": _mask(3, 4)}))


def _convert(values, to_tensor):
    out = []
    for v in values:
        out.append(to_tensor(v) if isinstance(v, np.ndarray) else v)
    return out


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_float64(case):
    _, gfn, tfn, inputs, kwargs = case
    tin = _convert(inputs, lambda a: torch.tensor(np.asarray(a), requires_grad=_diff(a)))
    gin = _convert(inputs, lambda a: gc.tensor(np.asarray(a), requires_grad=_diff(a)))
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    gkw = {k: gc.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    touts, gouts = _outputs(tfn(*tin, **tkw)), _outputs(gfn(*gin, **gkw))
    assert len(touts) == len(gouts)
    for t, g in zip(touts, gouts):
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), rtol=1e-9, atol=1e-12)
    w = [np.random.default_rng(k).uniform(0.5, 1.5, tuple(t.shape)) for k, t in enumerate(touts)]
    tloss = sum((t * torch.tensor(wk)).sum() for t, wk in zip(touts, w) if t.requires_grad)
    if not isinstance(tloss, torch.Tensor):
        return
    leaves = [(t, g) for t, g in zip(tin, gin) if isinstance(t, torch.Tensor) and t.requires_grad]
    tgrads = torch.autograd.grad(tloss, [t for t, _ in leaves], allow_unused=True)
    gloss = None
    for g, wk in zip(gouts, w):
        term = (g * gc.tensor(wk)).sum()
        gloss = term if gloss is None else gloss + term
    gloss.backward()
    for (t, g), tg in zip(leaves, tgrads):
        expected = np.zeros(tuple(t.shape)) if tg is None else tg.numpy()
        got = np.zeros(tuple(t.shape)) if g.grad is None else g.grad.numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-10)


COMPILED = [
    ("triplet", lambda a, p, n: F.triplet_margin_loss(a, p, n), [(5, 3), (5, 3), (5, 3)]),
    ("multilabel_soft_margin", lambda x, y: F.multilabel_soft_margin_loss(x, y), [(5, 4), (5, 4)]),
    ("cosine_similarity", lambda a, b: F.cosine_similarity(a, b), [(5, 3), (5, 3)]),
    ("masked_var", lambda x, m: gc.masked.var(x, 1, mask=m > 0), [(5, 4), (5, 4)]),
    ("masked_median", lambda x, m: gc.masked.median(x, 1, mask=m > 0), [(5, 4), (5, 4)]),
    ("channel_shuffle", lambda x: F.channel_shuffle(x, 2), [(5, 4, 3)]),
    ("native_group_norm", lambda x: gc.native_group_norm(x, None, None, 5, 4, 3, 2, 1e-5)[0], [(5, 4, 3)]),
]


@pytest.mark.parametrize("case", COMPILED, ids=[c[0] for c in COMPILED])
def test_compiled_matches_eager(case):
    _, fn, shapes = case
    arrays = [np.random.default_rng(k).standard_normal(s).astype(np.float32) for k, s in enumerate(shapes)]
    plan = gc.compile(fn, example_inputs=tuple(arrays))
    eager = fn(*[gc.tensor(a) for a in arrays]).numpy()
    np.testing.assert_allclose(np.asarray(plan(*arrays)), eager, rtol=1e-6, atol=1e-6)


def test_multi_head_attention_forward_matches_torch():
    r = np.random.default_rng(3)
    q, k = r.standard_normal((3, 2, 4)), r.standard_normal((5, 2, 4))
    w_in, b_in, w_out, b_out = r.standard_normal((12, 4)), r.standard_normal(12), r.standard_normal((4, 4)), \
        r.standard_normal(4)
    bk, bv = r.standard_normal(4), r.standard_normal(4)
    args = lambda t: (t(q), t(k), t(k), 4, 2, t(w_in), t(b_in), t(bk), t(bv), False, 0.0, t(w_out), t(b_out))  # noqa: E731
    tout = TF.multi_head_attention_forward(*args(torch.tensor), training=False)
    gout = F.multi_head_attention_forward(*args(gc.tensor), training=False)
    for g, t in zip(gout, tout):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-9, atol=1e-12)


def test_running_stats_updated_by_native_batch_norm():
    x = np.random.default_rng(1).standard_normal((4, 3, 2))
    rm, rv = gc.zeros(3).double(), gc.ones(3).double()
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    out = gc.native_batch_norm(gc.tensor(x), None, None, rm, rv, True, 0.3, 1e-5)
    tout = torch.native_batch_norm(torch.tensor(x), None, None, trm, trv, True, 0.3, 1e-5)
    for g, t in zip(out, tout):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-9)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-9)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-9)
    assert out[1].requires_grad is False


def test_unbatched_conv2d_and_prelu_scalar_weight():
    x, w = np.random.default_rng(2).standard_normal((2, 5, 5)), np.random.default_rng(3).standard_normal((3, 2, 3, 3))
    np.testing.assert_allclose(F.conv2d(gc.tensor(x), gc.tensor(w)).numpy(),
                               TF.conv2d(torch.tensor(x), torch.tensor(w)).numpy(), rtol=1e-9)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(gc.tensor(x), 2).numpy(),
                               TF.adaptive_avg_pool2d(torch.tensor(x), 2).numpy(), rtol=1e-9)
    np.testing.assert_allclose(F.prelu(gc.tensor(x), gc.tensor(0.25).double()).numpy(),
                               TF.prelu(torch.tensor(x), torch.tensor(0.25, dtype=torch.float64)).numpy())


def test_random_dropouts_keep_shape_and_identity_in_eval():
    x = gc.ones(4, 3, 2, 2, 2)
    assert F.alpha_dropout(x, 0.5) is x and F.dropout3d(x, 0.5, training=False) is x
    for out in (F.alpha_dropout(x, 0.5, True), F.feature_alpha_dropout(x, 0.5, True), F.dropout3d(x, 0.5),
                F.rrelu(-x, training=True)):
        assert out.shape == x.shape
    slopes = -F.rrelu(-x, 0.1, 0.3, training=True).numpy()
    assert ((slopes >= 0.1) & (slopes <= 0.3)).all()
    dropped = F.dropout3d(x, 0.5).numpy()
    assert set(np.unique(dropped)) <= {0.0, 2.0}
    assert (dropped.reshape(4, 3, -1).std(axis=2) == 0).all()  # whole channels


def test_refusals():
    plan = gc.compile(lambda x: F.pdist(x), example_inputs=(np.zeros((4, 3), np.float32),))  # N(N-1)/2 rows:
    with pytest.raises(gc.ShapeError, match="only runs at batch size 4.*pdist"):  # specialized at N
        plan(np.zeros((5, 3), np.float32))
    with pytest.raises(gc.ShapeError, match="glu"):
        F.glu(gc.ones(3))
    with pytest.raises(gc.GraphcError, match="per_sample_weights"):
        F.embedding_bag(gc.tensor([[0, 1]]), gc.ones(3, 2), mode="max", per_sample_weights=gc.ones(1, 2))
    with pytest.raises(gc.GraphcError, match="Anti-alias"):
        F.interpolate(gc.ones(1, 1, 4, 4), (2, 2), mode="nearest", antialias=True)
    with pytest.raises(gc.ShapeError, match="broadcastable mask"):
        gc.masked.sum(gc.ones(3), mask=gc.ones(2, 3) > 0)
    with pytest.raises(gc.GraphcError, match="static_k"):
        x = gc.ones(2, 1, 2)
        F.multi_head_attention_forward(x, x, x, 2, 1, gc.ones(6, 2), None, None, None, False, 0.0, gc.ones(2, 2), None,
                                       static_k=x)


THREE_D = [
    ("conv3d", lambda m: m.conv3d, [_randn(2, 4, 5, 4, 6), _randn(6, 2, 2, 3, 2), _randn(6)],
     {"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (2, 1, 1), "groups": 2}),
    ("conv3d_same", lambda m: m.conv3d, [_randn(3, 4, 5, 4), _randn(2, 3, 2, 3, 2)], {"padding": "same"}),
    ("conv_transpose3d", lambda m: m.conv_transpose3d, [_randn(2, 4, 3, 4, 3), _randn(4, 3, 3, 2, 2), _randn(6)],
     {"stride": (2, 3, 1), "padding": (1, 0, 1), "output_padding": (1, 2, 0), "groups": 2, "dilation": (2, 1, 2)}),
    ("avg_pool3d", lambda m: m.avg_pool3d, [_randn(2, 3, 5, 6, 5)],
     {"kernel_size": (3, 2, 3), "stride": (2, 2, 1), "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    ("avg_pool3d_divisor", lambda m: m.avg_pool3d, [_randn(2, 5, 6, 5)],
     {"kernel_size": 2, "padding": 1, "divisor_override": 3}),
    ("max_pool3d", lambda m: m.max_pool3d, [_randn(2, 3, 5, 6, 5)],
     {"kernel_size": (3, 2, 2), "stride": 2, "padding": (1, 1, 0), "dilation": (1, 2, 1), "return_indices": True}),
    ("adaptive_avg_pool3d", lambda m: m.adaptive_avg_pool3d, [_randn(2, 3, 5, 7, 4)], {"output_size": (3, None, 2)}),
    ("adaptive_max_pool3d", lambda m: m.adaptive_max_pool3d, [_randn(3, 5, 7, 4)],
     {"output_size": (2, 3, 3), "return_indices": True}),
]


@pytest.mark.parametrize("case", THREE_D, ids=[c[0] for c in THREE_D])
def test_three_d_matches_torch_float64(case):
    _, pick, inputs, kwargs = case
    test_matches_torch_float64(("", pick(F), pick(TF), inputs, kwargs))


def test_three_d_compiled_matches_eager():
    r = np.random.default_rng(5)
    w, b = gc.tensor(r.standard_normal((4, 3, 3, 3, 3)).astype(np.float32)), gc.tensor(np.ones(4, np.float32))
    wt = gc.tensor(r.standard_normal((3, 2, 3, 3, 3)).astype(np.float32))

    def fn(x):
        y = F.conv3d(x, w, b, padding=1) + F.conv_transpose3d(x, wt, stride=1, padding=1).sum(1, keepdim=True)
        pooled, idx = F.max_pool3d(y, 2, return_indices=True)
        return F.max_unpool3d(pooled, idx, 2, output_size=tuple(y.shape[2:])) + F.avg_pool3d(y, 3, 1, 1)

    x = r.standard_normal((3, 3, 4, 5, 6)).astype(np.float32)
    plan = gc.compile(fn, example_inputs=(x,))
    for batch in (3, 2):
        np.testing.assert_allclose(np.asarray(plan(x[:batch])), fn(gc.tensor(x[:batch])).numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_max_unpool3d_matches_torch():
    x = torch.tensor(_randn(2, 3, 4, 6, 5))
    y, i = TF.max_pool3d(x, 2, return_indices=True)
    got = F.max_unpool3d(gc.tensor(y.numpy()), gc.tensor(i.numpy()), 2, output_size=(4, 6, 5)).numpy()
    np.testing.assert_array_equal(got, TF.max_unpool3d(y, i, 2, output_size=(4, 6, 5)).numpy())


@pytest.mark.parametrize("make", [
    lambda m: m.Conv3d(2, 4, (2, 3, 3), stride=(1, 2, 1), padding=1, padding_mode="reflect"),
    lambda m: m.Conv3d(2, 4, 3, padding="same", bias=False),
    lambda m: m.ConvTranspose3d(2, 4, 3, stride=2, padding=1, groups=2),
], ids=["conv3d_reflect", "conv3d_same", "conv_transpose3d"])
def test_three_d_modules_match_torch(make):
    torch.manual_seed(0)
    tm, gm = make(torch.nn), make(gc.nn)
    gm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(gm(gc.tensor(x)).numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    model = gc.nn.Sequential(gm, gc.nn.MaxPool3d(2, ceil_mode=True), gc.nn.AdaptiveAvgPool3d(1), gc.nn.Flatten())
    plan = gc.compile(model, example_inputs=(x,))
    np.testing.assert_allclose(np.asarray(plan(x[:1])), model(gc.tensor(x[:1])).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kwargs", [{"size": (4, 5)}, {"scale_factor": (0.45, 2.3)}, {"size": (3, 20), "align_corners": True}],
                         ids=["down", "scale", "corners"])
def test_antialias_matches_torch(mode, kwargs):
    case = ("", lambda x: F.interpolate(x, mode=mode, antialias=True, **kwargs),
            lambda x: TF.interpolate(x, mode=mode, antialias=True, **kwargs), [_randn(2, 3, 9, 13)], {})
    test_matches_torch_float64(case)


LOSS_MODULES = [
    ("CosineEmbeddingLoss", {"margin": 0.3}, lambda a, p, n, y: (a, p, y)),
    ("MarginRankingLoss", {}, lambda a, p, n, y: (a[:, 0], p[:, 0], y)),
    ("TripletMarginLoss", {"swap": True}, lambda a, p, n, y: (a, p, n)),
    ("TripletMarginWithDistanceLoss", {"margin": 2.0}, lambda a, p, n, y: (a, p, n)),
    ("SoftMarginLoss", {}, lambda a, p, n, y: (a, np.sign(p))),
    ("MultiLabelSoftMarginLoss", {}, lambda a, p, n, y: (a, (p > 0).astype(np.float32))),
    ("MultiMarginLoss", {"p": 2}, lambda a, p, n, y: (a, np.array([0, 2, 1, 2]))),
    ("MultiLabelMarginLoss", {}, lambda a, p, n, y: (a, np.array([[0, 2, -1], [1, -1, 0], [2, 1, 0], [-1, 0, 0]]))),
    ("PoissonNLLLoss", {"full": True}, lambda a, p, n, y: (a, np.abs(p) * 3)),
    ("HingeEmbeddingLoss", {"reduction": "none"}, lambda a, p, n, y: (a[:, 0], y)),
    ("GaussianNLLLoss", {}, lambda a, p, n, y: (a, p, np.abs(n) + 0.1)),
]


@pytest.mark.parametrize("case", LOSS_MODULES, ids=[c[0] for c in LOSS_MODULES])
def test_loss_modules_match_torch(case):
    name, kwargs, pick = case
    r = np.random.default_rng(4)
    a, p, n = (r.standard_normal((4, 3)).astype(np.float32) for _ in range(3))
    args = pick(a, p, n, np.sign(r.standard_normal(4)).astype(np.float32))
    got = getattr(gc.nn, name)(**kwargs)(*[gc.tensor(x) for x in args]).numpy()
    want = getattr(torch.nn, name)(**kwargs)(*[torch.tensor(x) for x in args]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_functional_modules_match_torch():
    torch.manual_seed(0)
    x = np.random.default_rng(6).standard_normal((4, 6, 3)).astype(np.float32)
    pairs = [(gc.nn.Hardshrink(0.3), torch.nn.Hardshrink(0.3)), (gc.nn.Softshrink(0.3), torch.nn.Softshrink(0.3)),
             (gc.nn.GLU(1), torch.nn.GLU(1)), (gc.nn.RReLU().eval(), torch.nn.RReLU().eval()),
             (gc.nn.ChannelShuffle(3), torch.nn.ChannelShuffle(3)), (gc.nn.RMSNorm((6, 3)), torch.nn.RMSNorm((6, 3)))]
    for g, t in pairs:
        np.testing.assert_allclose(g(gc.tensor(x)).numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    two = [(gc.nn.CosineSimilarity(2), torch.nn.CosineSimilarity(2)), (gc.nn.PairwiseDistance(3), torch.nn.PairwiseDistance(3))]
    for g, t in two:
        np.testing.assert_allclose(g(gc.tensor(x), gc.tensor(x[::-1].copy())).numpy(),
                                   t(torch.tensor(x), torch.tensor(x[::-1].copy())).numpy(), rtol=1e-6, atol=1e-6)
    tb, gb = torch.nn.Bilinear(3, 3, 2), gc.nn.Bilinear(3, 3, 2)
    gb.load_state_dict({k: v.detach().numpy() for k, v in tb.state_dict().items()})
    np.testing.assert_allclose(gb(gc.tensor(x), gc.tensor(x)).numpy(),
                               tb(torch.tensor(x), torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
