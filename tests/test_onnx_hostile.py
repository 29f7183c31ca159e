"""Hostile ONNX files: ``gc.load`` refuses them with a short, specific ``GraphcError``.

Covered: an external-data tensor outside the model's folder in a Constant node's ``value``
(the rest of external data is in test_onnx_external.py); tensors whose
declared dims disagree with the bytes they carry (huge, int64-overflowing, negative, wrong
typed-field count) are refused without allocating; a file over ``memory_budget`` is refused
before parsing; non-models (random, truncated, empty bytes); unknown, unsupported and
custom-domain ops (named with their node); unsupported opsets, local functions, sparse
initializers; bad graph edges (dynamic inner dims, string inputs, dangling outputs, inputs
used before definition); asymmetric Conv pads and size-changing ``ceil_mode``; 100 KB names
kept out of messages; malformed nodes of supported ops; and one valid model as a sanity check.
Every model is built here with ``onnx.helper``; nothing is downloaded.
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

import graphc as gc

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
BIG = "A" * 100_000


def make_model(nodes, inits=(), inputs=None, outputs=None, opset=17, **kwargs):
    inputs = [helper.make_tensor_value_info("x", FLOAT, ["N", 4])] if inputs is None else inputs
    outputs = [helper.make_tensor_value_info("y", FLOAT, None)] if outputs is None else outputs
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kwargs)


def write(path, model) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    return str(path)


def refused(path, match, **kwargs) -> str:
    with pytest.raises(gc.GraphcError, match=match) as info:
        gc.load(path, **kwargs)
    return str(info.value)


def external(tensor, location: str):
    """``tensor`` turned into an external-data tensor naming ``location`` (as onnx saves it)."""
    size = len(tensor.raw_data)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(size))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def add_weight_model(weight):
    return make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [weight])


def image_input(size=8):
    return [helper.make_tensor_value_info("x", FLOAT, ["N", 1, size, size])]


# ---- sanity -----------------------------------------------------------------------------------
def test_valid_gemm_relu_model_loads_and_matches_numpy(tmp_path):
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
             helper.make_node("Relu", ["h"], ["y"], name="act")]
    path = write(tmp_path / "ok.onnx", make_model(nodes, [numpy_helper.from_array(w, "w"),
                                                           numpy_helper.from_array(b, "b")]))
    x = rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(gc.load(path)(x)), np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-6)


# ---- external data (more in test_onnx_external.py) ---------------------------------------------
def test_external_data_in_a_constant_node_value_outside_the_folder_is_refused_naming_the_node(tmp_path):
    (tmp_path / "c.bin").write_bytes(b"\0" * 16)
    value = external(numpy_helper.from_array(np.zeros(4, np.float32), "cv"), "../c.bin")
    nodes = [helper.make_node("Constant", [], ["c"], name="const_node", value=value),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    path = write(tmp_path / "sub" / "m.onnx", make_model(nodes))
    with pytest.raises(gc.PlanFormatError, match=r"attribute 'value' keeps its data in '\.\./c\.bin', a path "
                                                 r"with '\.\.'") as info:
        gc.load(path)
    assert "const_node (Constant)" in str(info.value)


# ---- declared sizes ---------------------------------------------------------------------------
@pytest.mark.parametrize("dims, fields, match", [
    ([2**40], {"raw_data": b"\0" * 16}, r"initializer 'w' declares shape \[1099511627776\] \(4398046511104 bytes\)"),
    ([2**62, 2**62], {"raw_data": b"\0" * 16}, r"initializer 'w' declares shape \[4611686018427387904, 46116"),
    ([-1, 4], {"raw_data": b"\0" * 16}, r"initializer 'w' declares negative dims \[-1, 4\]"),
    ([4], {"float_data": [1.0, 2.0, 3.0]}, r"initializer 'w' declares shape \[4\] \(4 values\) but holds 3"),
], ids=["2**40", "int64-overflow", "negative", "float_data-count"])
def test_tensor_whose_declared_size_disagrees_with_its_data_is_refused_fast(tmp_path, dims, fields, match):
    weight = TensorProto(name="w", data_type=FLOAT, dims=dims, **fields)
    path = write(tmp_path / "m.onnx", add_weight_model(weight))
    start = time.perf_counter()
    refused(path, match)
    assert time.perf_counter() - start < 5


def test_file_over_the_memory_budget_is_refused_before_parsing(tmp_path):
    weight = numpy_helper.from_array(np.zeros(4096, np.float32), "w")  # 16 KB of initializer
    path = write(tmp_path / "m.onnx", make_model([helper.make_node("Relu", ["x"], ["y"])], [weight]))
    with pytest.raises(gc.PlanFormatError, match=r"the ONNX file is \d+ bytes, over the 1000-byte limit"):
        gc.load(path, memory_budget=1000)


def test_reading_a_small_file_reserves_only_its_own_size(tmp_path):
    """``f.read(n)`` reserves n bytes before it reads: read with the 2 GiB limit as n, every
    load reserved 2 GiB (a MemoryError under a tight RLIMIT_AS). The bound is generous: the
    import itself allocates a few MiB."""
    path = write(tmp_path / "m.onnx", make_model([helper.make_node("Relu", ["x"], ["y"])]))
    tracemalloc.start()
    try:
        gc.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 2**20


# ---- not a model ------------------------------------------------------------------------------
def _valid_bytes():
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                      [numpy_helper.from_array(np.zeros(64, np.float32), "w")]).SerializeToString()


@pytest.mark.parametrize("data", [
    b"\x12\xff\xff\xff\xff\x0f" + np.random.default_rng(0).bytes(500),  # a field longer than the file
    _valid_bytes()[:-37],
    b"",
    b"\x08\x07\x12" + b"\xff" * 64,
], ids=["random", "truncated", "empty", "onnx-header-then-garbage"])
def test_bytes_that_are_not_a_model_give_a_plan_format_error(tmp_path, data):
    path = write(tmp_path / "m.onnx", data)
    with pytest.raises(gc.PlanFormatError, match=r"m\.onnx is not (a valid ONNX|an ONNX) model"):
        gc.load(path)


# ---- ops ---------------------------------------------------------------------------------------
def _loop_node():
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [helper.make_tensor_value_info(n, t, []) for n, t in
                              (("i", TensorProto.INT64), ("c", TensorProto.BOOL))],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, [])])
    return helper.make_node("Loop", ["", ""], ["y"], name="loop_node", body=body)


@pytest.mark.parametrize("node, op, match", [
    (helper.make_node("FooBar", ["x"], ["y"], name="foo_node"), "FooBar",
     r"op 'FooBar' is not in opset 17 of its domain \(onnx [\d.]+ has no definition of it there\)"),
    (helper.make_node("ImageDecoder", ["x"], ["y"], name="decode_node"), "ImageDecoder",
     r"ONNX op 'ImageDecoder'-20 is not supported by graphc's importer"),
    (_loop_node(), "Loop", r"ONNX op 'Loop'"),
], ids=["FooBar", "ImageDecoder", "Loop"])
def test_unsupported_op_is_refused_naming_the_op_and_node(tmp_path, node, op, match):
    message = refused(write(tmp_path / "m.onnx", make_model([node], opset=20 if op == "ImageDecoder" else 17)), match)
    assert f"[{node.name} ({op}) at m.onnx node 0]" in message


def test_custom_domain_op_is_refused_naming_the_domain(tmp_path):
    node = helper.make_node("Attention", ["x"], ["y"], name="attn", domain="com.microsoft")
    model = make_model([node])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    message = refused(write(tmp_path / "m.onnx", model), r"op 'Attention' of domain 'com.microsoft' is not supported")
    assert "attn (Attention)" in message


# ---- model structure ---------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [0, 30])
def test_unsupported_opset_is_refused(tmp_path, opset):
    path = write(tmp_path / "m.onnx", make_model([helper.make_node("Relu", ["x"], ["y"])], opset=opset))
    refused(path, rf"ONNX opset {opset} is not supported; graphc imports default-domain opsets 1-\d+ \(the newest "
                  r"the installed onnx [\d.]+ defines\)")


def test_model_local_function_is_refused(tmp_path):
    function = helper.make_function("local", "myfn", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                                    [helper.make_opsetid("", 17)])
    model = make_model([helper.make_node("myfn", ["x"], ["y"], domain="local")], functions=[function])
    refused(write(tmp_path / "m.onnx", model), r"model-local functions \('myfn', \.\.\.\) are not supported")


def test_sparse_initializer_is_refused(tmp_path):
    values = numpy_helper.from_array(np.ones(2, np.float32), "sp")
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([0, 3], np.int64)), [4])
    model = make_model([helper.make_node("Add", ["x", "sp"], ["y"])])
    model.graph.sparse_initializer.append(sparse)
    refused(write(tmp_path / "m.onnx", model), r"sparse initializers are not supported")


# ---- graph edges -------------------------------------------------------------------------------
def test_unnamed_dynamic_non_leading_input_dim_is_refused(tmp_path):
    inputs = [helper.make_tensor_value_info("x", FLOAT, ["N", ""])]
    path = write(tmp_path / "m.onnx", make_model([helper.make_node("Relu", ["x"], ["y"])], inputs=inputs))
    refused(path, r"input 'x' has a dynamic dim 1 \(unnamed\) without a name graphc can use")


def test_a_named_dynamic_input_dim_is_a_symbol(tmp_path):
    """A named dim (an identifier) reads as graphc's symbol of that name (issue 31)."""
    inputs = [helper.make_tensor_value_info("x", FLOAT, ["N", "features"])]
    path = write(tmp_path / "m.onnx", make_model([helper.make_node("Relu", ["x"], ["y"])], inputs=inputs))
    plan = gc.load(path)
    assert str(plan.graph.inputs[0].type) == "f32[N,features]"
    assert plan(-np.ones((2, 5), np.float32)).tolist() == [[0.0] * 5] * 2


def test_string_input_is_refused(tmp_path):
    inputs = [helper.make_tensor_value_info("words", TensorProto.STRING, ["N"])]
    path = write(tmp_path / "m.onnx", make_model([helper.make_node("Identity", ["words"], ["y"])], inputs=inputs))
    refused(path, r"input 'words' is not a tensor of a dtype graphc holds \(tensor_type, STRING\)")


def test_graph_output_computed_by_no_node_is_refused(tmp_path):
    outputs = [helper.make_tensor_value_info("ghost", FLOAT, None)]
    path = write(tmp_path / "m.onnx", make_model([helper.make_node("Relu", ["x"], ["y"])], outputs=outputs))
    refused(path, r"graph output 'ghost' is not computed by any node")


def test_node_input_used_before_it_is_defined_is_refused(tmp_path):
    nodes = [helper.make_node("Add", ["x", "later"], ["y"], name="early_add"),
             helper.make_node("Relu", ["x"], ["later"], name="late_relu")]
    message = refused(write(tmp_path / "m.onnx", make_model(nodes)), r"input 'later' is used before any node")
    assert "early_add (Add)" in message


# ---- Conv and pooling forms graphc cannot run --------------------------------------------------
def test_asymmetric_conv_pads_import(tmp_path):
    """Refused before issue 35; the input is padded first (tests/test_onnx_pool_import.py
    compares such convolutions with onnxruntime)."""
    weight = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_asym", pads=[0, 0, 1, 1])
    plan = gc.load(write(tmp_path / "m.onnx", make_model([node], [weight], inputs=image_input())))
    out = plan(np.ones((2, 1, 8, 8), np.float32))
    assert out.shape == (2, 2, 7, 7)  # 8 + 1 - 3 + 1 per dim
    assert out[0, 0, 0, 0] == 9 and out[0, 0, -1, -1] == 4  # the last window holds 2x2 real cells


def test_maxpool_ceil_mode_that_changes_the_output_size_imports(tmp_path):
    """Refused before issue 33; pooling has ceil_mode now (tests/test_onnx_vision_import.py
    runs onnx's own ceil cases against their expected outputs)."""
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool_ceil", kernel_shape=[3, 3], strides=[2, 2],
                            ceil_mode=1)
    plan = gc.load(write(tmp_path / "m.onnx", make_model([node], inputs=image_input(6))))
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(2, 1, 6, 6)
    out = plan(x)
    assert out.shape == (2, 1, 3, 3)  # floor mode would give 2x2
    np.testing.assert_array_equal(out[..., -1, -1], x[..., 5, 5])  # the last window: rows and columns 4..5


# ---- malicious names ---------------------------------------------------------------------------
def _names_case(kind):
    if kind == "domain":
        return make_model([helper.make_node("Attention", ["x"], ["y"], name="n", domain=BIG)])
    if kind == "op_type":
        return make_model([helper.make_node(BIG, ["x"], ["y"], name="n")])
    if kind == "node_name":
        return make_model([helper.make_node("FooBar", ["x"], ["y"], name=BIG)])
    if kind == "input_name":
        return make_model([helper.make_node("Relu", [BIG], ["y"], name="n")])
    if kind == "output_name":
        outputs = [helper.make_tensor_value_info(BIG, FLOAT, None)]
        return make_model([helper.make_node("Relu", ["x"], ["y"])], outputs=outputs)
    return add_weight_model(external(numpy_helper.from_array(np.zeros(4, np.float32), "w"), "../" + BIG))


@pytest.mark.parametrize("kind", ["domain", "op_type", "node_name", "input_name", "output_name", "location"])
def test_100kb_names_keep_the_message_short(tmp_path, kind):
    message = refused(write(tmp_path / "m.onnx", _names_case(kind)), r"m\.onnx: ")
    assert len(message) < 2000


# ---- malformed nodes of supported ops ----------------------------------------------------------
def _int64(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _node_case(op, inputs, inits=(), graph_inputs=None, **attrs):
    """One ``pytest.param``: node ``bad`` of ``op``."""
    node = helper.make_node(op, inputs, ["y"], name="bad", **attrs)
    return pytest.param(node, list(inits), graph_inputs, id=op)


ZEROS4 = numpy_helper.from_array(np.zeros(4, np.float32), "b")
ZERO1 = numpy_helper.from_array(np.zeros(1, np.float32), "c")


@pytest.mark.parametrize("node, inits, inputs", [
    _node_case("Add", ["x"]),  # `a, b = args` on one input
    _node_case("MaxPool", ["x"], graph_inputs=image_input()),  # no kernel_shape
    _node_case("Gemm", ["x", "b"], [ZEROS4]),  # 1-D B: _shape(b)[1]
    _node_case("Concat", ["x", "x"]),  # no axis
    _node_case("ConstantOfShape", ["s"], [_int64("s", [2**62, 4])]),  # np.full: array is too big
    _node_case("Range", ["a", "l", "d"], [_int64("a", 0), _int64("l", 2**62), _int64("d", 1)]),
    _node_case("Expand", ["c", "s"], [ZERO1, _int64("s", [2**62, 4])]),  # iterator too large
    _node_case("Reshape", ["x", "s"], [_int64("s", [3, 7])]),
    _node_case("Transpose", ["x"], perm=[5, 9]),
])
def test_malformed_node_of_a_supported_op_is_a_graphc_error_naming_the_node(tmp_path, node, inits, inputs):
    refused(write(tmp_path / "m.onnx", make_model([node], inits, inputs=inputs)), r"\[bad \(\w+\) at m\.onnx node 0\]")


def test_small_file_expanding_to_constants_over_the_memory_budget_is_refused(tmp_path):
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], name="expand_me"),
             helper.make_node("Mul", ["c", "c"], ["y"], name="square")]
    path = write(tmp_path / "m.onnx", make_model(nodes, [_int64("s", [2**20, 4])]))  # 16 MiB from ~100 bytes
    refused(path, r"budget", memory_budget=10_000)


def test_products_over_the_budget_are_refused_before_they_are_computed(tmp_path):
    """A small constant made huge by an outer product is refused before numpy computes it
    (4 GiB here); the same product of graph values is refused by its type (next test)."""
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], name="column"),
             helper.make_node("Transpose", ["c"], ["t"], name="row", perm=[1, 0]),
             helper.make_node("MatMul", ["c", "t"], ["y"], name="outer")]
    path = write(tmp_path / "m.onnx", make_model(nodes, [_int64("s", [2**15, 1])]))
    refused(path, r"MatMul of shape \[32768, 32768\] would take 4294967296 bytes, over the memory budget of "
                  r"100000000 bytes \[outer", memory_budget=100_000_000)


def test_graph_values_over_the_budget_are_refused_before_constant_folding(tmp_path):
    nodes = [helper.make_node("Expand", ["x", "s"], ["y"], name="wide")]  # x is f32[N, 4]: a graph value
    path = write(tmp_path / "m.onnx", make_model(nodes, [_int64("s", [2**25, 1, 4])]))
    refused(path, r"f32\[33554432,N,4\] \(536870912 bytes at batch 1\) is over the memory budget .*\[wide",
            memory_budget=100_000_000)


def test_a_value_computed_twice_is_refused(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="first"), helper.make_node("Neg", ["x"], ["y"], name="again")]
    refused(write(tmp_path / "m.onnx", make_model(nodes)), r"value 'y' is computed twice .*\[again \(Neg\)")
