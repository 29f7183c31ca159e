"""Acceptance (issue 34): graph-network, REINFORCE / actor-critic and forward-forward model files
in public PyTorch idiom run on graphc with only their imports changed, eagerly and compiled, and
match PyTorch from the same weights.

The files in ``tests/models`` (loaded twice by ``load_model_file``, as PyTorch and as graphc;
see tests/test_pytorch_models.py):

- ``pygcn``: Kipf's pygcn (``GraphConvolution`` with ``FloatTensor`` parameters and a uniform
  ``reset_parameters``, ``torch.spmm(adj, support)``, ``sparse_mx_to_torch_sparse_tensor`` from
  numpy COO arrays, ``output[idx_train]``, NLL on ``log_softmax``, Adam with weight decay);
- ``reinforce`` and ``actor_critic``: pytorch/examples' reinforcement_learning (``Categorical(probs)``,
  ``m.log_prob(action)`` saved per step, returns normalised with ``.std()``, a numpy cart-pole);
- ``forward_forward``: mohammadpz/pytorch_forward_forward (``overlay_y_on_x`` with
  ``x_[range(n), y] = x.max()``, ``Layer(nn.Linear)`` with its own Adam, ``x.norm(2, 1,
  keepdim=True)``, ``torch.mm``, goodness ``.pow(2).mean(1)``, ``torch.randperm`` / ``torch.randint``
  negatives).

Compiled: the GCN's ``train(epoch)`` body and each forward-forward layer's step through
``gc.compile(step, ...)``; the RL files' episode loop talks to a Python environment every step,
so what compiles is the same update over a whole episode (``make_update_step``), which must
move the weights as PyTorch's ``finish_episode`` over the saved log-probs does.

Sampling: graphc's and PyTorch's random streams differ, so for the comparisons graphc replays
the actions PyTorch's ``Categorical.sample`` drew (the module's ``Categorical`` replaced by a
subclass whose ``sample`` returns them); graphc's own sampling runs in its own tests here.

Tolerances: float32 RTOL 1e-4 / ATOL 1e-6 (tests/test_pytorch_models.py's training bar) on
parameters, losses and accuracies; float64 runs (GCN, forward-forward) at 1e-9 relative.
PyTorch's side goes through the ``torch_ref`` fixture (recorded in
tests/data/torch_test_issue34_model_files.npz for machines without torch).
"""
from __future__ import annotations

import ast

import numpy as np
import pytest

import graphc as gc
from conftest import HAVE_TORCH
from test_pytorch_models import MODELS_DIR, load_model_file
from test_sequence_model_files import assert_close

if HAVE_TORCH:
    import torch

FILES = ["pygcn", "reinforce", "actor_critic", "forward_forward"]
# the plain-torch imports of test_pytorch_models.ALLOWED_IMPORTS, numpy, and the from-imports
# these repositories write
IMPORTS = {("torch", None), ("torch.nn", "nn"), ("torch.nn.functional", "F"), ("torch.optim", "optim"),
           ("math", None), ("numpy", "np")}
FROM_IMPORTS = {("torch.nn.parameter", "Parameter"), ("torch.nn.modules.module", "Module"),
                ("torch.distributions", "Categorical"), ("collections", "namedtuple"), ("torch.optim", "Adam")}


def lib_of(lib):
    return gc if lib == "graphc" else torch


def numpy_of(value):
    value = value.detach().numpy() if hasattr(value, "detach") else value
    return np.array(value, copy=True)


def state_of(module, prefix=""):
    return {f"{prefix}{k}": numpy_of(v) for k, v in module.state_dict().items()}


def load_state(module, state, lib, prefix=""):
    module.load_state_dict({k[len(prefix):]: lib_of(lib).from_numpy(v.copy()) for k, v in state.items()
                            if k.startswith(prefix)}, strict=True)


def assert_state(got, ref, what, rtol=1e-4, atol=1e-6):
    for key, value in got.items():
        assert_close(value, ref[f"state.{key}"], f"{what}: {key}", rtol=rtol, atol=atol)


@pytest.mark.parametrize("file", FILES)
def test_model_files_are_plain_pytorch(file):
    text = (MODELS_DIR / f"{file}.py").read_text()
    tree = ast.parse(text)
    imports = {(a.name, a.asname) for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    froms = {(node.module, a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names}
    assert imports <= IMPORTS and froms <= FROM_IMPORTS, (imports, froms)
    assert "graphc" not in text
    assert load_model_file(file, "graphc").torch is gc


# ---- pygcn ----------------------------------------------------------------------------------------------
GCN_EPOCHS = 3


def gcn(lib, state=None, double=False, dropout=0.0):
    """(file module, model, optimizer, data) with the file's own load_data and make_model."""
    m = load_model_file("pygcn", lib)
    lib_of(lib).manual_seed(0)
    adj, features, labels, idx_train, idx_val, idx_test = m.load_data()
    model, optimizer = m.make_model(features.shape[1], int(labels.max()) + 1, dropout=dropout)
    if double:
        model, adj, features = model.double(), adj.double(), features.double()
        optimizer = m.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    if state is not None:
        load_state(model, state, lib)
    return m, model, optimizer, (adj, features, labels, idx_train, idx_val, idx_test)


def gcn_train(lib, state, double=False, compiled=False):
    m, model, optimizer, (adj, features, labels, idx_train, idx_val, idx_test) = gcn(lib, state, double)
    train = m.make_train_step(model, optimizer, adj, labels, idx_train, idx_val)
    if compiled:
        train = gc.compile(train, (features.numpy(),))
        history = [[float(np.asarray(v)) for v in train(features.numpy())] for _ in range(GCN_EPOCHS)]
    else:
        history = [[float(v) for v in train(features)] for _ in range(GCN_EPOCHS)]
    return {"history": np.array(history), "test": np.array(m.test(model, features, adj, labels, idx_test)),
            **{f"state.{k}": v for k, v in state_of(model).items()}}


def test_gcn_construction_and_init_match_torch(torch_ref):
    _, model, _, (adj, features, labels, idx_train, _, _) = gcn("graphc")
    state = state_of(model)

    def run():
        _, tm, _, _ = gcn("torch", state)
        return {"keys": np.array(list(tm.state_dict())),
                "dtypes": np.array([str(v.dtype) for v in tm.state_dict().values()])}

    ref = torch_ref([state], run)
    assert list(state) == ref["keys"].tolist()
    assert [f"torch.{v.dtype}" for v in state.values()] == ref["dtypes"].tolist()
    for name, value in state.items():  # reset_parameters: uniform(-1/sqrt(out), 1/sqrt(out))
        stdv = 1 / np.sqrt(state[name.replace("bias", "weight")].shape[1])
        assert np.abs(value).max() <= stdv and value.std() > stdv / 3, name
    assert adj.is_sparse and adj.shape == (features.shape[0],) * 2 and labels.dtype == gc.int64
    assert idx_train.dtype == gc.int64 and repr(model.gc1) == "GraphConvolution (12 -> 16)"


@pytest.mark.parametrize("double", [False, True], ids=["float32", "float64"])
def test_gcn_training_eager_and_compiled_match_torch(double, torch_ref):
    """Three epochs of the file's train(epoch) body (losses and accuracies on train and val),
    then its test(): eagerly and with the body compiled (the sparse adjacency a plan constant)."""
    _, model, _, _ = gcn("graphc", double=double)
    state = state_of(model)
    ref = torch_ref([state, double], lambda: gcn_train("torch", state, double))
    tol = dict(rtol=1e-9, atol=1e-12) if double else dict(rtol=1e-4, atol=1e-6)
    for compiled in (False, True):
        what = f"gcn {'float64' if double else 'float32'} {'compiled' if compiled else 'eager'}"
        got = gcn_train("graphc", state, double, compiled)
        assert_close(got["history"], ref["history"], f"{what}: losses and accuracies", **tol)
        assert_close(got["test"], ref["test"], f"{what}: test()", **tol)
        assert_state({k[len("state."):]: v for k, v in got.items() if k.startswith("state.")}, ref, what, **tol)


def test_gcn_eval_forward_on_a_renormalised_dense_adjacency_matches_torch(torch_ref):
    """The file's normalize_adj_dense (``torch.eye``, ``.pow(-0.5)``, ``torch.diag``, ``torch.mm``,
    ``.to_sparse()``) feeding the model's eval forward: eager and compiled (float64)."""
    _, model, _, (adj, features, *_) = gcn("graphc", double=True)
    state, dense = state_of(model), np.asarray(adj.to_dense().numpy() > 0, np.float64)
    x = features.numpy()

    def run():
        m, tm, _, _ = gcn("torch", state, double=True)
        with torch.no_grad():
            out = tm.eval()(torch.from_numpy(x), m.normalize_adj_dense(torch.from_numpy(dense)))
        return {"out": out.numpy()}

    ref = torch_ref([state, dense, x], run)
    m = load_model_file("pygcn", "graphc")
    norm = m.normalize_adj_dense(gc.from_numpy(dense))
    assert norm.is_sparse and norm.is_coalesced()
    model.eval()
    with gc.no_grad():
        assert_close(model(gc.from_numpy(x), norm).numpy(), ref["out"], "renormalised eager", rtol=1e-12, atol=1e-14)
    plan = gc.compile(lambda f: model(f, norm), (x,))
    assert_close(plan(x), ref["out"], "renormalised compiled", rtol=1e-12, atol=1e-14)


def test_gcn_trains_with_dropout_on_graphc():
    """The example's settings (dropout 0.5, 40 epochs): the training loss falls and test() runs."""
    m, model, optimizer, (adj, features, labels, idx_train, idx_val, idx_test) = gcn("graphc", dropout=0.5)
    train = m.make_train_step(model, optimizer, adj, labels, idx_train, idx_val)
    losses = [float(train(features)[0]) for _ in range(40)]
    assert losses[-1] < 0.8 * losses[0], losses
    loss, acc = m.test(model, features, adj, labels, idx_test)
    assert np.isfinite(loss) and 0.0 <= acc <= 1.0


# ---- REINFORCE and actor-critic -----------------------------------------------------------------------------
EPISODES, MAX_STEPS = 3, 30


def replaying(categorical, actions):
    """``Categorical`` whose ``sample()`` returns the given actions in turn (PyTorch's draws)."""
    actions = iter(actions)

    class Replay(categorical):
        def sample(self, sample_shape=()):
            return super().sample(sample_shape) * 0 + int(next(actions))
    return Replay


def rl_policy(file, lib, state=None):
    m = load_model_file(file, lib)
    lib_of(lib).manual_seed(0)
    policy = m.Policy()
    if hasattr(policy, "dropout"):  # reinforce.py's Dropout(0.6): masks cannot match across libraries
        policy.dropout.p = 0.0
    if state is not None:
        load_state(policy, state, lib)
    return m, policy


def rl_episodes(file, lib, state, monkeypatch=None, actions=None):
    """EPISODES episodes of the example's loop (run_episode, finish_episode)."""
    m, policy = rl_policy(file, lib, state)
    optimizer, env = m.make_optimizer(policy), m.CartPole(seed=1, max_steps=MAX_STEPS)
    if actions is not None:
        monkeypatch.setattr(m, "Categorical", replaying(m.Categorical, actions))
    out = {}
    for i in range(EPISODES):
        reward, states, taken = m.run_episode(policy, env)
        loss = m.finish_episode(policy, optimizer)
        out.update({f"reward{i}": np.array(reward), f"states{i}": states, f"actions{i}": taken,
                    f"loss{i}": np.array(loss)})
        out.update({f"ep{i}.{k}": v for k, v in state_of(policy).items()})
    return out


@pytest.mark.parametrize("file", ["reinforce", "actor_critic"])
def test_rl_episodes_eager_and_compiled_update_match_torch(file, torch_ref, monkeypatch):
    """The example's loop on graphc (replaying PyTorch's actions) gives PyTorch's rewards,
    losses and weights after every episode; the compiled whole-episode update, fed PyTorch's
    episodes, moves the weights as PyTorch's finish_episode did."""
    _, policy = rl_policy(file, "graphc")
    state = state_of(policy)
    ref = torch_ref([file, state], lambda: rl_episodes(file, "torch", state))
    actions = np.concatenate([ref[f"actions{i}"] for i in range(EPISODES)])
    got = rl_episodes(file, "graphc", state, monkeypatch, actions)
    for i in range(EPISODES):
        assert float(got[f"reward{i}"]) == float(ref[f"reward{i}"])
        np.testing.assert_array_equal(got[f"states{i}"], ref[f"states{i}"])
        # the loss sums one float32 term per step, of magnitude <= ~1, that cancel (normalised
        # returns): rounding of 30 terms, 1e-5 absolute (measured 4e-6)
        assert_close(got[f"loss{i}"], ref[f"loss{i}"], f"{file} eager loss {i}", atol=1e-5)
        assert_state({k: got[f"ep{i}.{k}"] for k in state}, {f"state.{k}": ref[f"ep{i}.{k}"] for k in state},
                     f"{file} eager episode {i}")

    m, policy = rl_policy(file, "graphc", state)
    update = None
    for i in range(EPISODES):
        states, taken = ref[f"states{i}"], ref[f"actions{i}"]
        returns = m.discounted_returns([1.0] * len(taken))
        if update is None:  # compiled once: episodes of other lengths run on the symbolic batch
            update = gc.compile(m.make_update_step(policy, m.make_optimizer(policy)), (states, taken, returns))
        assert_close(np.asarray(update(states, taken, returns)), ref[f"loss{i}"], f"{file} compiled loss {i}",
                     atol=1e-5)
        assert_state(state_of(policy), {f"state.{k}": ref[f"ep{i}.{k}"] for k in state},
                     f"{file} compiled episode {i}")
    assert len({len(ref[f"actions{i}"]) for i in range(EPISODES)}) > 1  # the plan ran at several lengths


@pytest.mark.parametrize("file", ["reinforce", "actor_critic"])
def test_rl_samples_its_own_actions_on_graphc(file):
    """graphc's own Categorical sampling drives the example's loop; the policy learns from it.
    The action frequencies follow the policy's probabilities (compiled sampling as well)."""
    m, policy = rl_policy(file, "graphc")
    optimizer, env = m.make_optimizer(policy), m.CartPole(seed=2, max_steps=MAX_STEPS)
    before = state_of(policy)
    for _ in range(2):
        reward, states, taken = m.run_episode(policy, env)
        assert set(taken.tolist()) <= {0, 1} and reward == len(taken)
        assert np.isfinite(m.finish_episode(policy, optimizer))
    assert any(not np.array_equal(v, before[k]) for k, v in state_of(policy).items())

    def act(x):
        probs = policy(x)
        probs = probs[0] if isinstance(probs, tuple) else probs
        return m.Categorical(probs).sample(), probs
    states = np.repeat(np.array([[0.01, -0.02, 0.03, 0.01]], np.float32), 4000, axis=0)
    gc.manual_seed(3)
    for run in (lambda x: act(gc.from_numpy(x)), gc.compile(act, (states,))):
        actions, probs = (numpy_of(a) for a in run(states))
        freq, p = actions.mean(), float(probs[0, 1])
        assert abs(freq - p) < 4 * np.sqrt(p * (1 - p) / len(states)), (freq, p)


# ---- forward-forward ---------------------------------------------------------------------------------------
FF_DIMS, FF_N, FF_EPOCHS = [30, 40, 40], 40, 12


def ff_data():
    rng = np.random.default_rng(0)
    prototypes, y = rng.random((10, FF_DIMS[0])), np.arange(FF_N) % 10
    x = (0.7 * prototypes[y] + 0.3 * rng.random((FF_N, FF_DIMS[0])) - 0.1307) / 0.3081
    return x, y, (y + rng.integers(1, 10, FF_N)) % 10


def ff_net(lib, state, double):
    m = load_model_file("forward_forward", lib)
    net = m.Net(FF_DIMS, num_epochs=FF_EPOCHS)
    for i, layer in enumerate(net.layers):
        if double:
            layer.double()
        load_state(layer, state, lib, f"{i}.")
        layer.opt = m.Adam(layer.parameters(), lr=0.03)  # the optimizer of the loaded (double) weights
    return m, net


def ff_train(lib, state, double=False, compiled=False):
    """Each layer's epochs (train_step) on the positive and negative data, layer by layer, as
    Layer.train does; then Net.predict."""
    m, net = ff_net(lib, state, double)
    x, y, y_neg = ff_data()
    x = x.astype(np.float64 if double else np.float32)
    x, y, y_neg = (lib_of(lib).from_numpy(a.copy()) for a in (x, y, y_neg))
    h_pos, h_neg = m.overlay_y_on_x(x, y), m.overlay_y_on_x(x, y_neg)
    out = {"x_pos": numpy_of(h_pos)}
    losses = []
    for layer in net.layers:
        if compiled:
            step = gc.compile(layer.train_step, (h_pos.numpy(), h_neg.numpy()))
            losses += [float(np.asarray(step(h_pos.numpy(), h_neg.numpy()))) for _ in range(layer.num_epochs)]
        else:
            losses += [float(layer.train_step(h_pos, h_neg)) for _ in range(layer.num_epochs)]
        h_pos, h_neg = layer.forward(h_pos).detach(), layer.forward(h_neg).detach()
    out.update({"losses": np.array(losses), "predict": numpy_of(net.predict(x)), "error": np.array(m.error(net, x, y))})
    out.update({f"state.{i}.{k}": v for i, layer in enumerate(net.layers) for k, v in state_of(layer).items()})
    return out


@pytest.mark.parametrize("double", [False, True], ids=["float32", "float64"])
def test_forward_forward_eager_and_compiled_match_torch(double, torch_ref):
    m = load_model_file("forward_forward", "graphc")
    gc.manual_seed(0)
    state = {f"{i}.{k}": v for i, layer in enumerate(m.Net(FF_DIMS).layers) for k, v in state_of(layer).items()}
    if double:
        state = {k: v.astype(np.float64) for k, v in state.items()}
    ref = torch_ref([state, ff_data(), double], lambda: ff_train("torch", state, double))
    tol = dict(rtol=1e-9, atol=1e-12) if double else dict(rtol=1e-4, atol=1e-6)
    for compiled in (False, True):
        what = f"forward-forward {'float64' if double else 'float32'} {'compiled' if compiled else 'eager'}"
        got = ff_train("graphc", state, double, compiled)
        np.testing.assert_array_equal(got["x_pos"], ref["x_pos"])
        assert_close(got["losses"], ref["losses"], f"{what}: losses", **tol)
        assert_state({k[len("state."):]: v for k, v in got.items() if k.startswith("state.")}, ref, what, **tol)
        np.testing.assert_array_equal(got["predict"], ref["predict"])
        assert float(got["error"]) == float(ref["error"])
    assert ref["losses"][FF_EPOCHS - 1] < 0.9 * ref["losses"][0]  # the first layer learned something


def test_forward_forward_own_negatives_on_graphc():
    """The repository's main(): Net.train on x_pos and randperm negatives, then the error; and
    randint negatives never carry the true label."""
    m = load_model_file("forward_forward", "graphc")
    gc.manual_seed(1)
    x, y, _ = ff_data()
    x, y = gc.from_numpy(x.astype(np.float32)), gc.from_numpy(y)
    net = m.Net(FF_DIMS, num_epochs=3)
    net.train(m.overlay_y_on_x(x, y), m.make_negative(x, y))
    assert 0.0 <= m.error(net, x, y) <= 1.0
    y_neg = m.make_negative_labels(y)
    assert y_neg.dtype == gc.int64 and not bool((y_neg == y).any()) and int(y_neg.max()) <= 9
