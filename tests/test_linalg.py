"""gc.linalg against PyTorch in float64: values and gradients of every LAPACK op on square,
tall, wide and batched inputs (sign-ambiguous factors through gauge-invariant functions, as
PyTorch's own op_db does), compiled == eager (forward and a training step through the vjps),
and the refusals."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(34)


def rand(*shape):
    return RNG.standard_normal(shape)


def spd(*shape):
    a = rand(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check(gfn, tfn, *arrays, grad=True, rtol=1e-7, atol=1e-8):
    """gfn(graphc tensors) and tfn(torch tensors) agree in value and in the gradient of
    sum(w * out) for fixed random weights w, all float64."""
    g_in = [gc.tensor(a, requires_grad=grad) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=grad) for a in arrays]
    g_out, t_out = _flat(gfn(*g_in)), _flat(tfn(*t_in))
    assert len(g_out) == len(t_out)
    weights = [RNG.uniform(0.5, 1.5, tuple(t.shape)) for t in t_out]
    for g, t in zip(g_out, t_out):
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), rtol=rtol, atol=atol)
        assert g.dtype.name == str(t.dtype).split(".")[-1]
    if not grad:
        return
    float_pairs = [(g, t, w) for g, t, w in zip(g_out, t_out, weights) if t.dtype.is_floating_point]
    g_loss = sum((g * gc.tensor(w)).sum() for g, t, w in float_pairs)
    t_loss = sum((t * torch.tensor(w)).sum() for g, t, w in float_pairs)
    g_loss.backward()
    t_grads = torch.autograd.grad(t_loss, t_in, allow_unused=True)
    for g, t in zip(g_in, t_grads):
        want = np.zeros(g.shape) if t is None else t.numpy()
        np.testing.assert_allclose(g.grad.numpy(), want, rtol=1e-6, atol=1e-7)


SHAPES = [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 3, 4), (2, 1, 3, 3)]
SQUARE = [(4, 4), (2, 3, 3), (2, 1, 5, 5)]


@pytest.mark.parametrize("shape", SQUARE)
def test_inverse_and_determinants(shape):
    a = rand(*shape) + 3 * np.eye(shape[-1])
    check(gc.linalg.inv, torch.linalg.inv, a)
    check(gc.linalg.det, torch.linalg.det, a)
    check(gc.linalg.slogdet, torch.linalg.slogdet, a)
    check(gc.logdet, torch.logdet, spd(*shape))


@pytest.mark.parametrize("b_shape", [(4,), (4, 1), (4, 3), (2, 4, 3), (3, 2, 4, 2)])
def test_solve_broadcasts_and_takes_vectors(b_shape):
    a = rand(2, 4, 4) + 4 * np.eye(4) if len(b_shape) > 2 else rand(4, 4) + 4 * np.eye(4)
    check(gc.linalg.solve, torch.linalg.solve, a, rand(*b_shape))
    if len(b_shape) > 1:  # (PyTorch refuses a vector B with left=False)
        check(lambda x, y: gc.linalg.solve(x, y, left=False), lambda x, y: torch.linalg.solve(x, y, left=False),
              a, rand(*b_shape[:-2], 3, 4))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular(upper, left, unit):
    a = rand(2, 4, 4) + 4 * np.eye(4)
    b = rand(2, 4, 3) if left else rand(2, 3, 4)
    check(lambda x, y: gc.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit),
          lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit), a, b)
    legacy = rand(2, 4, 3)
    check(lambda y, x: gc.triangular_solve(y, x, upper=upper, transpose=left, unitriangular=unit),
          lambda y, x: torch.triangular_solve(y, x, upper=upper, transpose=left, unitriangular=unit), legacy, a)


@pytest.mark.parametrize("upper", [True, False])
def test_cholesky_family(upper):
    a = spd(2, 4, 4)
    check(lambda x: gc.linalg.cholesky(x, upper=upper), lambda x: torch.linalg.cholesky(x, upper=upper), a)
    factor = np.linalg.cholesky(a)
    factor = np.swapaxes(factor, -1, -2) if upper else factor
    check(lambda x: gc.cholesky_inverse(x, upper), lambda x: torch.cholesky_inverse(x, upper), factor)
    check(lambda b, x: gc.cholesky_solve(b, x, upper), lambda b, x: torch.cholesky_solve(b, x, upper),
          rand(2, 4, 2), factor)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode):
    differentiable = mode == "reduced" or (mode == "complete" and shape[-2] <= shape[-1])
    check(lambda x: gc.linalg.qr(x, mode), lambda x: torch.linalg.qr(x, mode), rand(*shape), grad=differentiable)


def _gauge_free_svd(lib):
    """|U|, S, |Vh|: a column's sign is LAPACK's choice (op_db compares the same)."""
    def fn(x, full):
        u, s, vh = lib.linalg.svd(x, full_matrices=full)
        if full:  # the extra columns are not determined by A: keep the first k
            k = s.shape[-1]
            u, vh = u[..., :, :k], vh[..., :k, :]
        return u.abs(), s, vh.abs()
    return fn


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [False, True])
def test_svd(shape, full):
    g, t = _gauge_free_svd(gc), _gauge_free_svd(torch)
    check(lambda x: g(x, full), lambda x: t(x, full), rand(*shape))
    check(gc.linalg.svdvals, torch.linalg.svdvals, rand(*shape))
    check(lambda x: gc.svd(x).S, lambda x: torch.svd(x).S, rand(*shape))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(uplo):
    a = rand(2, 4, 4)
    check(lambda x: (lambda r: (r[0], r[1].abs()))(gc.linalg.eigh(x, uplo)),
          lambda x: (lambda r: (r[0], r[1].abs()))(torch.linalg.eigh(x, uplo)), a)
    check(lambda x: gc.linalg.eigvalsh(x, uplo), lambda x: torch.linalg.eigvalsh(x, uplo), a)


@pytest.mark.parametrize("shape", SHAPES)
def test_lu_matches_lapack_pivots_and_gradient(shape):
    check(gc.linalg.lu, torch.linalg.lu, rand(*shape))


def test_matrix_exp_and_power():
    a = rand(2, 4, 4)
    check(gc.linalg.matrix_exp, torch.linalg.matrix_exp, a)
    check(gc.linalg.matrix_exp, torch.linalg.matrix_exp, 20 * a)  # several squarings
    for n in (0, 1, 3, -2):
        check(lambda x: gc.linalg.matrix_power(x, n), lambda x: torch.linalg.matrix_power(x, n), a + 3 * np.eye(4))


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norms_and_cond(ord):
    a = rand(2, 4, 3)
    check(lambda x: gc.linalg.matrix_norm(x, ord), lambda x: torch.linalg.matrix_norm(x, ord), a)
    check(lambda x: gc.linalg.matrix_norm(x, ord, dim=(0, 2), keepdim=True),
          lambda x: torch.linalg.matrix_norm(x, ord, dim=(0, 2), keepdim=True), a)
    # (PyTorch's cond backward fails for the orders computed through the inverse)
    check(lambda x: gc.linalg.cond(x, ord), lambda x: torch.linalg.cond(x, ord), rand(3, 3) + 2 * np.eye(3),
          grad=ord in ("nuc", 2, -2))


@pytest.mark.parametrize("ord", [0, 0.5, 1, 2, 3, np.inf, -np.inf, -1])
def test_vector_norm_subgradient_at_zero(ord):
    x = rand(3, 4)
    x[0] = 0.0
    x[1, 1] = 0.0
    check(lambda v: gc.linalg.vector_norm(v, ord, dim=1), lambda v: torch.linalg.vector_norm(v, ord, dim=1), x)


@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv_rank_and_lstsq(hermitian):
    b = rand(4, 2)
    a = b @ b.T if hermitian else b @ rand(2, 4)  # rank 2
    check(lambda x: gc.linalg.pinv(x, hermitian=hermitian), lambda x: torch.linalg.pinv(x, hermitian=hermitian), a)
    assert gc.linalg.matrix_rank(gc.tensor(a), hermitian=hermitian).item() == 2
    full = rand(4, 4)
    check(lambda x: gc.linalg.pinv(x, hermitian=hermitian), lambda x: torch.linalg.pinv(x, hermitian=hermitian),
          full + full.T if hermitian else full)
    for driver in ("gels", "gelsy", "gelsd", "gelss"):
        check(lambda x, y: gc.linalg.lstsq(x, y, driver=driver)[:2] + (gc.linalg.lstsq(x, y, driver=driver)[3],),
              lambda x, y: torch.linalg.lstsq(x, y, driver=driver)[:2] + (torch.linalg.lstsq(x, y, driver=driver)[3],),
              rand(5, 3), rand(5, 2))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_householder_product_and_ormqr(left, transpose):
    a, tau = rand(5, 3), RNG.uniform(0.5, 1.5, 3)
    check(gc.linalg.householder_product, torch.linalg.householder_product, a, tau)
    c = rand(5, 2) if left else rand(2, 5)
    check(lambda x, t, y: gc.ormqr(x, t, y, left, transpose), lambda x, t, y: torch.ormqr(x, t, y, left, transpose),
          a, tau, c)
    h, t = gc.geqrf(gc.tensor(a))
    th, tt = torch.geqrf(torch.tensor(a))
    np.testing.assert_allclose(h.numpy(), th.numpy(), atol=1e-12)
    np.testing.assert_allclose(t.numpy(), tt.numpy(), atol=1e-12)


def test_small_composites():
    check(lambda x, y: gc.linalg.cross(x, y, dim=1), lambda x, y: torch.linalg.cross(x, y, dim=1), rand(2, 3, 4), rand(1, 3, 4))
    check(gc.linalg.vecdot, torch.linalg.vecdot, rand(3, 4), rand(4))
    check(lambda x: gc.linalg.vander(x, N=4), lambda x: torch.linalg.vander(x, N=4), rand(2, 3))
    check(lambda *m: gc.linalg.multi_dot(m), lambda *m: torch.linalg.multi_dot(m), rand(3), rand(3, 4), rand(4, 2), rand(2))
    check(lambda x: gc.linalg.tensorinv(x, 2), lambda x: torch.linalg.tensorinv(x, 2), rand(2, 3, 6) .reshape(6, 6).reshape(2, 3, 6))
    check(gc.linalg.tensorsolve, torch.linalg.tensorsolve, rand(2, 3, 6), rand(2, 3))


def test_compiled_matches_eager_with_a_symbolic_batch():
    """Batches of matrices keep the batch dim symbolic; a 2-D input pins it (traced again fixed)."""
    def fn(a, b):
        q, r = gc.linalg.qr(a)
        s = gc.linalg.svdvals(a)
        return gc.linalg.solve(a @ a.mT + gc.eye(3), b), q.abs(), r.abs(), s, gc.linalg.det(a @ a.mT)

    a, b = rand(4, 3, 3).astype(np.float32), rand(4, 3, 2).astype(np.float32)
    plan = gc.compile(fn, example_inputs=(a, b))
    for n in (4, 2):
        got = plan(a[:n], b[:n])
        want = fn(gc.tensor(a[:n]), gc.tensor(b[:n]))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-5, atol=1e-6)
    square = gc.compile(lambda m: gc.linalg.inv(m), example_inputs=(a[0],))
    np.testing.assert_allclose(square(a[0]), np.linalg.inv(a[0].astype(np.float64)), rtol=1e-4)


class _Whitening(nn.Module):
    """A model whose training step runs the vjps of several LAPACK ops as graph ops."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(gc.tensor(np.eye(3) + 0.1 * rand(3, 3), dtype=gc.float32))

    def forward(self, x):
        m = self.w @ self.w.mT + gc.eye(3)
        low = gc.linalg.cholesky(m)
        y = gc.linalg.solve_triangular(low, x.mT, upper=False).mT
        return y @ gc.linalg.inv(m) + gc.linalg.slogdet(m).logabsdet + gc.linalg.eigvalsh(m).sum() \
            + gc.linalg.svdvals(self.w).sum() + gc.linalg.matrix_exp(0.1 * self.w).sum()


def test_training_step_compiles_the_vjps():
    x, y = rand(8, 3).astype(np.float32), rand(8, 3).astype(np.float32)
    eager, compiled = _Whitening(), _Whitening()
    compiled.load_state_dict(eager.state_dict())
    opt_e = optim.SGD(eager.parameters(), lr=0.1)
    step = gc.compile(compiled, (x, y), loss_fn=nn.MSELoss(), optimizer=optim.SGD(compiled.parameters(), lr=0.1))
    step(x, y)
    loss = nn.MSELoss()(eager(gc.tensor(x)), gc.tensor(y))
    opt_e.zero_grad()
    loss.backward()
    opt_e.step()
    np.testing.assert_allclose(compiled.w.numpy(), eager.w.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(eager.w.numpy(), _Whitening().w.numpy() * 0)


@pytest.mark.parametrize("call, error", [
    (lambda: gc.linalg.inv(gc.tensor([[1, 2], [3, 4]])), gc.ShapeError),
    (lambda: gc.linalg.det(gc.zeros(2, 3)), gc.ShapeError),
    (lambda: gc.linalg.inv(gc.zeros(3)), gc.ShapeError),
    (lambda: gc.linalg.inv(gc.zeros(2, 2)), gc.GraphcError),
    (lambda: gc.linalg.cholesky(-gc.eye(2)), gc.GraphcError),
    (lambda: gc.linalg.inv_ex(gc.eye(2)), gc.GraphcError),
    (lambda: gc.linalg.lu_factor(gc.eye(2)), gc.GraphcError),
    (lambda: gc.lu(gc.eye(2)), gc.GraphcError),
    (lambda: gc.linalg.qr(gc.eye(2), "thin"), gc.ShapeError),
    (lambda: gc.linalg.matrix_norm(gc.eye(2), 3), gc.ShapeError),
])
def test_refusals(call, error):
    with pytest.raises(error):
        call()


def test_qr_r_mode_has_no_gradient():
    a = gc.tensor(rand(3, 3), requires_grad=True)
    with pytest.raises(gc.GraphcError, match="mode='r'"):
        gc.linalg.qr(a, "r").R.sum().backward()


def test_out_writes_into_given_tensors():
    out = gc.zeros(2, 2)
    assert gc.linalg.inv(gc.eye(2) * 2, out=out) is out
    np.testing.assert_allclose(out.numpy(), np.eye(2) / 2)
    sign, logabs = gc.zeros(()), gc.zeros(())
    result = gc.linalg.slogdet(gc.eye(2) * 3, out=(sign, logabs))
    assert result.sign is sign and abs(logabs.item() - 2 * np.log(3)) < 1e-6
    with pytest.raises(gc.GraphcError, match="does not resize"):
        gc.linalg.inv(gc.eye(2), out=gc.zeros(3, 3))


def test_det_gradient_is_the_cofactor_matrix_at_singular_inputs():
    """adj(A)^T, from the SVD: finite at rank n - 1 (where det * A^-T is 0 * inf)."""
    a = np.array([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.3, -1.0, 2.0]])  # rows 0 and 1 dependent
    x = gc.tensor(a, requires_grad=True)
    gc.linalg.det(x).backward()
    cofactor = np.array([[np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) * (-1) ** (i + j) for j in range(3)]
                         for i in range(3)])
    np.testing.assert_allclose(x.grad.numpy(), cofactor, atol=1e-12)
