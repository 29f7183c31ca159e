"""``graphc.data.DataLoader`` against ``torch.utils.data.DataLoader`` (live, or its recorded
batches in tests/data/): the same batches for dict, tuple and TensorDataset samples, with
``batch_size``, ``drop_last``, ``batch_sampler`` and ``batch_size=None``; shuffling that follows
``gc.manual_seed`` or a ``gc.Generator``; PyTorch's option checks; and Tensor batches that
PyTorch-style loops feed to eager models and compiled plans alike."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from data_structures import Point, as_outputs, assert_same_batches
from graphc import nn, optim
from graphc.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler, TensorDataset, default_collate

try:
    import torch
except ImportError:  # the comparisons replay tests/data/torch_test_data_loader.npz
    torch = None


class Records:
    """A map-style dataset of dict samples with nested fields (numpy arrays and Python values),
    written once for both libraries: each collates the numpy arrays into its own tensors."""

    def __init__(self, n: int = 7):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        image = np.arange(6, dtype=np.float32).reshape(1, 2, 3) + i
        return {"image": image, "label": i % 3, "weight": i / 4, "name": f"r{i}",
                "extra": (np.full(2, i, np.int64), Point(i, float(i)))}


def digits_like(n=10):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, 1, 4, 4)).astype(np.float32), rng.integers(0, 3, n)


def torch_loader(dataset, **options):
    return list(torch.utils.data.DataLoader(dataset, **options))


@pytest.mark.parametrize("batch_size, drop_last", [(3, False), (3, True), (1, False), (7, False)])
def test_dict_samples_batch_like_pytorch(batch_size, drop_last, torch_ref):
    options = {"batch_size": batch_size, "drop_last": drop_last}
    want = torch_ref(options, lambda: as_outputs(torch_loader(Records(), **options)))
    loader = DataLoader(Records(), **options)
    batches = list(loader)
    assert_same_batches(batches, want)
    assert len(loader) == len(batches)


def test_tensor_dataset_batches_like_pytorch(torch_ref):
    x, y = digits_like()
    want = torch_ref([x, y], lambda: as_outputs(torch_loader(
        torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=4)))
    assert_same_batches(DataLoader(TensorDataset(x, y), batch_size=4), want)
    # the fast path (one fancy index per array) gives what collating the samples one by one gives
    per_sample = DataLoader(TensorDataset(x, y), batch_size=4, collate_fn=lambda samples: default_collate(samples))
    assert_same_batches(per_sample, want)


def test_a_tensor_dataset_subclass_reads_its_samples_its_own_way():
    """The fast path (one fancy index per array) must not bypass an overridden __getitem__."""
    class Doubled(TensorDataset):
        def __getitem__(self, index):
            x, y = super().__getitem__(index)
            return x * 2, y

    x, y = digits_like(6)
    batches = list(DataLoader(Doubled(x, y), batch_size=4))
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches]), x * 2)


def test_samples_one_at_a_time_convert_like_pytorch(torch_ref):
    want = torch_ref({"n": 3}, lambda: as_outputs(torch_loader(Records(3), batch_size=None)))
    loader = DataLoader(Records(3), batch_size=None)
    assert_same_batches(loader, want)
    assert len(loader) == 3 and loader.batch_size is None


def test_batch_sampler_batches_like_pytorch(torch_ref):
    batches = [[3, 1], [0], [4, 2, 6]]
    want = torch_ref(batches, lambda: as_outputs(torch_loader(Records(), batch_sampler=batches)))
    loader = DataLoader(Records(), batch_sampler=batches)
    assert_same_batches(loader, want)
    assert len(loader) == 3 and loader.batch_size is None and loader.batch_sampler is batches


def epoch_orders(loader, epochs=3):
    """Each epoch's order of the last field (the labels, or the only array) over ``epochs`` epochs."""
    return [np.concatenate([batch[-1].numpy() for batch in loader]).tolist() for _ in range(epochs)]


def test_shuffle_follows_gc_manual_seed():
    ds = TensorDataset(*digits_like(20))
    gc.manual_seed(5)
    first = epoch_orders(DataLoader(ds, batch_size=6, shuffle=True))
    gc.manual_seed(5)
    again = epoch_orders(DataLoader(ds, batch_size=6, shuffle=True))
    gc.manual_seed(6)
    other = epoch_orders(DataLoader(ds, batch_size=6, shuffle=True))
    labels = ds.arrays[1].tolist()
    assert first == again  # two runs after the same seed: the same orders
    assert first[0] != first[1] != first[2]  # a new order each epoch
    assert other != first
    assert all(sorted(order) == sorted(labels) for order in first)  # each epoch covers the data once


def test_shuffle_seeded_after_the_loader_was_built():
    """The order is drawn when an epoch starts (as in PyTorch), so a seed set later still counts."""
    ds = TensorDataset(np.arange(30))
    loader = DataLoader(ds, batch_size=30, shuffle=True)
    gc.manual_seed(2)
    a = next(iter(loader))[0].tolist()
    gc.manual_seed(2)
    assert next(iter(loader))[0].tolist() == a != list(range(30))


def test_generator_gives_its_own_reproducible_order():
    ds = TensorDataset(np.arange(30))

    def orders(seed):
        gc.manual_seed(seed)  # the global seed does not touch a loader with its own generator
        return epoch_orders(DataLoader(ds, batch_size=7, shuffle=True, generator=gc.Generator().manual_seed(11)))

    assert orders(0) == orders(1)
    assert orders(0)[0] != orders(0)[1]
    unseeded = [epoch_orders(DataLoader(ds, batch_size=30, shuffle=True, generator=gc.Generator()), 1)
                for _ in range(2)]
    assert unseeded[0] == unseeded[1]  # a fresh generator starts from a fixed seed, as torch.Generator()


def test_seed_is_a_generator_seeded_with_it():
    """``seed=n`` keeps its order from before generators existed: numpy's default_rng(n), one
    permutation per epoch, so the examples' runs are unchanged."""
    ds = TensorDataset(np.arange(12))
    rng = np.random.default_rng(4)
    want = [rng.permutation(12).tolist() for _ in range(3)]
    assert epoch_orders(DataLoader(ds, batch_size=5, shuffle=True, seed=4)) == want
    loader = DataLoader(ds, shuffle=True, generator=gc.Generator().manual_seed(4), batch_size=5)
    assert epoch_orders(loader) == want


def test_samplers_and_lengths_follow_pytorch():
    ds = TensorDataset(np.arange(10))
    loader = DataLoader(ds, batch_size=4, shuffle=True, drop_last=True)
    assert isinstance(loader.sampler, RandomSampler) and isinstance(loader.batch_sampler, BatchSampler)
    assert len(loader) == 2 and [len(b[0]) for b in loader] == [4, 4]
    loader = DataLoader(ds, batch_size=4)
    assert isinstance(loader.sampler, SequentialSampler) and len(loader) == 3
    assert len(DataLoader(ds, batch_size=4, sampler=RandomSampler(ds, num_samples=25))) == 7
    with_repeats = RandomSampler(ds, replacement=True, num_samples=50, generator=gc.Generator().manual_seed(0))
    drawn = list(with_repeats)
    assert len(drawn) == 50 and set(drawn) <= set(range(10)) and len(set(drawn)) < 50
    longer = list(RandomSampler(ds, num_samples=25, generator=gc.Generator()))
    assert sorted(longer[:10]) == sorted(longer[10:20]) == list(range(10)) and len(longer) == 25


def test_collate_fn_gets_the_list_of_samples():
    seen = []
    loader = DataLoader(Records(5), batch_size=2, collate_fn=lambda samples: seen.append(samples) or len(samples))
    assert list(loader) == [2, 2, 1]
    assert [s["name"] for s in seen[0]] == ["r0", "r1"]


@pytest.mark.parametrize("options, message", [
    ({"shuffle": True, "sampler": [0, 1]}, "sampler option is mutually exclusive with shuffle"),
    ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive with batch_size"),
    ({"batch_sampler": [[0]], "drop_last": True}, "batch_sampler option is mutually exclusive"),
    ({"batch_size": None, "drop_last": True}, "batch_size=None option disables auto-batching"),
    ({"batch_size": 0}, "batch_size should be a positive integer value, but got batch_size=0"),
    ({"drop_last": 1}, "drop_last should be a boolean value"),
    ({"num_workers": 2}, r"num_workers=2: graphc's DataLoader reads batches in this process"),
    ({"num_workers": -1}, "num_workers must be an integer >= 0"),
    ({"pin_memory": True}, "pin_memory=True is not supported"),
    ({"prefetch_factor": 2}, "prefetch_factor and persistent_workers need worker processes"),
    ({"persistent_workers": True}, "prefetch_factor and persistent_workers need worker processes"),
    ({"timeout": -1}, "timeout option should be non-negative"),
    ({"collate_fn": 3}, "collate_fn must be callable"),
    ({"seed": 1, "generator": gc.Generator()}, "pass generator= or seed="),
    ({"shuffle": True, "generator": np.random.default_rng(0)}, "generator must be a gc.Generator"),
])
def test_bad_options_are_refused_as_pytorch_refuses_them(options, message):
    with pytest.raises(gc.GraphcError, match=message):
        DataLoader(TensorDataset(np.arange(4)), **options)


def test_options_that_need_no_workers_are_accepted():
    """As PyTorch with num_workers=0: worker_init_fn is never called, timeout is not used."""
    loader = DataLoader(TensorDataset(np.arange(4)), batch_size=2, num_workers=0, timeout=5,
                        worker_init_fn=lambda worker: pytest.fail("no workers to initialise"))
    assert [b[0].tolist() for b in loader] == [[0, 1], [2, 3]]


def test_generator_api():
    g = gc.Generator()
    assert g.initial_seed() == 67280421310721 and g.manual_seed(3) is g and g.initial_seed() == 3
    assert g.seed() == g.initial_seed()
    with pytest.raises(gc.GraphcError, match="the seed must be an integer >= 0"):
        g.manual_seed(-1)
    with pytest.raises(gc.GraphcError, match="not a state from Generator.get_state"):
        g.set_state({"nonsense": 1})
    with pytest.raises(gc.GraphcError, match="graphc's generators run on the host"):
        gc.Generator("cuda")


# ---- PyTorch-style loops over Tensor batches ---------------------------------------------------------------------
def model_and_loader():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))
    return model, DataLoader(TensorDataset(*digits_like(20)), batch_size=8, shuffle=True, seed=1)


def test_the_pytorch_loop_runs_eagerly_and_compiled_to_the_same_weights():
    """``for x, y in loader: x = x.to(device); loss = crit(model(x), y)``, eagerly and as a compiled
    step fed the loader's Tensors. Tolerance: float32 rounding of two evaluation orders over 3 steps."""
    device = gc.device("cpu")
    results = []
    for compiled in (False, True):
        model, loader = model_and_loader()
        opt, crit = optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss()

        def train_step(x, y):
            opt.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
            return loss

        example = next(iter(loader))  # in both runs, so that both train on the loader's next epoch
        step = gc.compile(train_step, example) if compiled else train_step
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            assert isinstance(x, gc.Tensor) and x.size(0) == y.size(0) and x.view(x.size(0), -1).shape[1] == 16
            step(x, y)
        results.append({k: np.array(v) for k, v in model.state_dict().items()})
    for name in results[0]:
        np.testing.assert_allclose(results[1][name], results[0][name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_plans_take_tensor_batches_without_a_numpy_round_trip(monkeypatch):
    """A plan reads a Tensor's own array; converting through ``np.asarray(tensor)`` would copy a
    GPU tensor to the host and back (Tensor.__array__ is what that conversion calls)."""
    model, loader = model_and_loader()
    x, y = next(iter(loader))
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.SGD(model.parameters(), lr=0.1))
    infer = gc.compile(model.eval(), (x,))

    def no_host_copy(*args, **kwargs):
        raise AssertionError("the plan converted a Tensor through numpy")

    monkeypatch.setattr(gc.Tensor, "__array__", no_host_copy)
    model.train()
    for x, y in loader:
        assert np.isfinite(float(step(x, y)))
    assert infer(x).shape == (x.size(0), 3)
    assert infer._as_array(x, "x") is x.array
    with pytest.raises(gc.ShapeError, match=r"input 'x': expected f32\[N,1,4,4\] \(N=4\), got i64\[4\]"):
        infer(y)


try:
    from graphc.executor.backends import get_backend

    get_backend("cuda")
    HAVE_CUDA, WHY = True, ""
except gc.DeviceError as e:
    HAVE_CUDA, WHY = False, str(e)


@pytest.mark.skipif(not HAVE_CUDA, reason=f"GPU test: {WHY}")
def test_a_gpu_tensor_feeds_a_cuda_plan_without_leaving_the_gpu(monkeypatch):
    model, loader = model_and_loader()
    x, y = next(iter(loader))
    infer = gc.compile(model.eval(), (x,), device="cuda")
    x_gpu = x.to("cuda")
    monkeypatch.setattr(gc.Tensor, "__array__", lambda *a, **k: pytest.fail("copied to the host"))
    assert infer._as_array(x_gpu, "x") is x_gpu.array
    out = infer(x_gpu)
    np.testing.assert_allclose(infer.backend.to_numpy(out), infer.backend.to_numpy(infer(x.numpy())), rtol=1e-6)
    cpu_plan = gc.compile(model, (x,))  # and the other way: a GPU tensor on a CPU plan is copied once
    assert isinstance(cpu_plan._as_array(x_gpu, "x"), np.ndarray)
