"""Printed-IR golden tests, the verifier, symbolic dims, and trace errors."""
import inspect

import numpy as np
import pytest

import graphc as gc
from graphc import ir, nn
from graphc.ir import DType, Graph, TensorType, Value
from graphc.ir.types import dim_div, dim_mul


def _line():
    return inspect.currentframe().f_back.f_lineno


def make_mlp():
    gc.manual_seed(0)
    line = _line() + 1
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)), line


def test_golden_mlp_ir():
    model, line = make_mlp()
    text = str(gc.jit.trace(model, np.zeros((32, 64), np.float32)))
    assert text == f"""graph Sequential(%x:f32[N,64]) {{
  params: @0.weight:f32[128,64], @0.bias:f32[128], @2.weight:f32[10,128], @2.bias:f32[10]
  %0:f32[N,128] = linear(%x, @0.weight, @0.bias)  # 0 (Linear) at test_ir.py:{line}
  %1:f32[N,128] = relu(%0)  # 1 (ReLU) at test_ir.py:{line}
  %2:f32[N,10] = linear(%1, @2.weight, @2.bias)  # 2 (Linear) at test_ir.py:{line}
  return %2
}}"""


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        x = self.features(x)
        return self.head(x.flatten(1))


def test_golden_cnn_ir_eval_and_train():
    model = SmallCNN().eval()
    ctor = inspect.getsourcelines(SmallCNN.__init__)[1] + 2
    flat = inspect.getsourcelines(SmallCNN.forward)[1] + 2
    ctor_head = ctor + 1
    x = np.zeros((16, 1, 8, 8), np.float32)
    text = str(gc.jit.trace(model, x))
    assert text == f"""graph SmallCNN(%x:f32[N,1,8,8]) {{
  params: @features.0.weight:f32[4,1,3,3], @features.0.bias:f32[4], @features.1.weight:f32[4], @features.1.bias:f32[4], @head.weight:f32[10,64], @head.bias:f32[10]
  buffers: @features.1.running_mean:f32[4], @features.1.running_var:f32[4], @features.1.num_batches_tracked:i64[]
  %0:f32[N,4,8,8] = conv2d[stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1](%x, @features.0.weight, @features.0.bias)  # features.0 (Conv2d) at test_ir.py:{ctor}
  %1:f32[N,4,8,8] = batch_norm[eps=1e-05](%0, @features.1.weight, @features.1.bias, @features.1.running_mean, @features.1.running_var)  # features.1 (BatchNorm2d) at test_ir.py:{ctor}
  %2:f32[N,4,8,8] = relu(%1)  # features.2 (ReLU) at test_ir.py:{ctor}
  %3:f32[N,4,4,4] = max_pool2d[kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], ceil_mode=False, dilation=[1, 1]](%2)  # features.3 (MaxPool2d) at test_ir.py:{ctor}
  %4:f32[N,64] = flatten[start_dim=1, end_dim=-1](%3)  # SmallCNN at test_ir.py:{flat}
  %5:f32[N,10] = linear(%4, @head.weight, @head.bias)  # head (Linear) at test_ir.py:{ctor_head}
  return %5
}}"""
    train_text = str(gc.jit.trace(model.train(), x))
    assert "batch_norm_train[eps=1e-05, momentum=0.1]" in train_text
    assert "update @features.1.num_batches_tracked <- %" in train_text
    assert "update @features.1.running_mean <- %" in train_text
    assert "update @features.1.running_var <- %" in train_text


def test_tracing_does_not_touch_buffers():
    model = SmallCNN().train()
    before = {k: v.copy() for k, v in model.state_dict().items()}
    gc.jit.trace(model, np.ones((4, 1, 8, 8), np.float32))
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)


def test_traced_graphs_verify():
    for model in (make_mlp()[0], SmallCNN().eval(), SmallCNN().train()):
        example = np.zeros((8, 64) if isinstance(model, nn.Sequential) else (8, 1, 8, 8), np.float32)
        ir.verify(gc.jit.trace(model, example))


def test_verifier_rejects_use_before_definition():
    g = Graph()
    x = g.add_input(Value("x", TensorType(("N", 3), DType.float32)))
    orphan = Value("ghost", TensorType(("N", 3), DType.float32))
    g.nodes.append(ir.Node("relu", [orphan], [Value("0", x.type)]))
    with pytest.raises(gc.VerifyError, match="before it is defined"):
        ir.verify(g)


def test_verifier_rejects_wrong_output_type_and_unknown_op():
    g = Graph()
    x = g.add_input(Value("x", TensorType(("N", 3), DType.float32)))
    g.nodes.append(ir.Node("relu", [x], [Value("0", TensorType(("N", 4), DType.float32))]))
    with pytest.raises(gc.VerifyError, match="differ from the rule"):
        ir.verify(g)
    g.nodes[0] = ir.Node("os.system", [x], [Value("0", x.type)])
    with pytest.raises(gc.VerifyError, match="unknown op"):
        ir.verify(g)


def test_symbolic_dim_arithmetic():
    assert dim_mul("N", 64) == "N*64"
    assert dim_div("N*64", 64) == "N"
    assert dim_div("N*64", "N") == 64
    assert dim_div(10, 3) is None
    assert TensorType(("N*4", 3), DType.float32).bind(5).shape == (20, 3)


def test_view_with_symbolic_batch_keeps_n():
    def fn(x):
        return x.view(x.shape[0], -1)

    g = gc.jit.trace(fn, np.zeros((64, 2, 3), np.float32))
    assert str(g.outputs[0].type) == "f32[N,6]"
    plan = gc.compile(fn, example_inputs=(np.zeros((64, 2, 3), np.float32),))
    assert plan(np.ones((5, 2, 3), np.float32)).shape == (5, 6)


class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent: both sides are traced and joined in a cond
            return x
        return -x


def test_data_dependent_control_flow_becomes_a_cond_at_the_user_line():
    line = inspect.getsourcelines(Branchy.forward)[1] + 1
    graph = gc.jit.trace(Branchy(), np.ones((2, 3), np.float32))
    cond = next(n for n in graph.nodes if n.op == "cond")
    assert f"test_ir.py:{line}" in cond.location()
    plan = gc.compile(Branchy(), (np.ones((2, 3), np.float32),))
    assert plan(np.ones((2, 3), np.float32)).tolist() == [[1.0] * 3] * 2
    assert plan(-np.ones((2, 3), np.float32)).tolist() == [[1.0] * 3] * 2


def test_shape_error_in_trace_names_module_and_line():
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(9, 2))
    with pytest.raises(gc.ShapeError) as info:
        gc.jit.trace(model, np.zeros((3, 4), np.float32))
    assert "1 (Linear) at test_ir.py:" in str(info.value)
