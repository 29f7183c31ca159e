"""Image-making losses (issue 33, point 5) against PyTorch 2.13 from the same weights: the fast
style-transfer objective (a content loss on feature maps, a style loss on their Gram matrices
through ``bmm``, a total-variation term) and a generator's ``BCELoss`` on a sigmoid output,
each trained three Adam steps eagerly and compiled; the image is clamped and written out as
uint8 as the examples do. The feature extractor is a small VGG-style stack (conv, ReLU, max
pool), frozen, as the examples freeze VGG.

float64 on both sides: the same ops in other summation orders, so 1e-9 relative is rounding
with room, and a wrong Gram normalisation, TV direction or frozen-feature gradient would be
off by far more.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

RTOL, ATOL = 1e-9, 1e-12
STEPS = 3


def modules(lib):
    nn = lib.nn
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1)).double()
    features = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 8, 3, padding=1), nn.ReLU()).double()
    for p in features.parameters():
        p.requires_grad_(False)
    return net, features


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    return features.bmm(features_t) / (ch * h * w)


def style_objective(lib, net, features, x, style):
    y = net(x)
    content = lib.nn.functional.mse_loss(features(y), features(x))
    style_loss = lib.nn.functional.mse_loss(gram_matrix(features(y)), gram_matrix(features(style)))
    tv = (y[:, :, 1:, :] - y[:, :, :-1, :]).abs().mean() + (y[:, :, :, 1:] - y[:, :, :, :-1]).abs().mean()
    return content + 1e2 * style_loss + 1e-2 * tv


def bce_objective(lib, net, features, x, style):
    probs = lib.sigmoid(net(x).mean(dim=(1, 2, 3))).unsqueeze(1)
    return lib.nn.BCELoss()(probs, lib.ones(x.shape[0], 1).double())


OBJECTIVES = {"style": style_objective, "bce": bce_objective}


def inputs():
    rng = np.random.default_rng(0)
    return [(rng.random((2, 3, 8, 8)), rng.random((2, 3, 8, 8))) for _ in range(STEPS)]


def start():
    gc.manual_seed(0)
    net, features = modules(gc)
    return ({k: np.asarray(v) for k, v in net.state_dict().items()},
            {k: np.asarray(v) for k, v in features.state_dict().items()})


def run(lib, which, compiled=False):
    net, features = modules(lib)
    weights, frozen = start()
    net.load_state_dict({k: lib.tensor(v) for k, v in weights.items()})
    features.load_state_dict({k: lib.tensor(v) for k, v in frozen.items()})
    opt = lib.optim.Adam(net.parameters(), lr=1e-2)
    objective = OBJECTIVES[which]

    def train_step(x, style):
        opt.zero_grad()
        loss = objective(lib, net, features, x, style)
        loss.backward()
        opt.step()
        return loss
    data = inputs()
    step = gc.compile(train_step, data[0]) if compiled else train_step
    wrap = (lambda a: a) if compiled else lib.tensor
    out = {}
    for i, (x, style) in enumerate(data):
        loss = step(wrap(x), wrap(style))
        out[f"loss{i}"] = np.array(float(np.asarray(loss.detach() if hasattr(loss, "detach") else loss)))
    with lib.no_grad():
        image = net(lib.tensor(data[0][0])).clamp(0, 1).mul(255).round()
    out["image"] = np.asarray(image.numpy()).astype(np.uint8)  # what the examples write out
    out.update({f"net.{k}": np.asarray(v.detach().numpy() if hasattr(v, "detach") else v)
                for k, v in net.state_dict().items()})
    return out


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("which", list(OBJECTIVES))
def test_image_losses_train_as_in_pytorch(which, compiled, torch_ref):
    def torch_run():
        import torch

        return run(torch, which)
    want = torch_ref([start(), inputs(), which], torch_run, name=which)
    got = run(gc, which, compiled)
    assert sorted(got) == sorted(want)
    for key in want:
        if key == "image":  # rounding to uint8: a value within 1e-9 of .5 may round either way
            assert np.abs(got[key].astype(int) - want[key].astype(int)).max() <= 1, key
            continue
        np.testing.assert_allclose(got[key], want[key], rtol=RTOL, atol=ATOL, err_msg=key)
