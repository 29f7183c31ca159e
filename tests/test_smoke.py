import numpy as np

import graphc as gc
from graphc import nn


def test_compiled_cnn_matches_eager_at_two_batch_sizes():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(128, 10)).eval()
    x = np.random.default_rng(0).standard_normal((64, 1, 8, 8)).astype(np.float32)
    plan = gc.compile(model, example_inputs=(x,))
    eager = model(gc.tensor(x)).numpy()
    np.testing.assert_allclose(plan(x), eager, atol=1e-6)
    np.testing.assert_allclose(plan(x[:5]), eager[:5], atol=1e-6)
