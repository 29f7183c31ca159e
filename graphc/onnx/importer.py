"""ONNX import: an ONNX model file as a graphc inference plan.

The file is read once, size-checked before the protobuf is parsed, and every tensor in it is
checked before it becomes an array: a tensor whose declared size does not match the bytes it
carries is refused before anything is allocated, and external data (``model.onnx.data``, as
``torch.onnx.export`` writes it) is read only from the model's own folder, with every
location, offset and length checked first (``external``). Each ONNX node then becomes
graphc ops through its reader in :data:`NODE_READERS` (``graph_reader`` reads the graph node by
node); shape arithmetic (``Shape -> Gather -> Concat -> Reshape``) is evaluated while
importing, so the plan holds only tensor ops. The usual inference passes then run (BN
folding, constant folding, the Linear/Conv + ReLU fusions).
"""
from __future__ import annotations

import os

from ..ir.errors import GraphcError, PlanFormatError, clip
from ..ir.types import dim_symbols
from ..executor.backends import NUMPY
from ..executor.budget import default_budget, value_bytes
from .control_import import CONTROL_READERS
from .export import onnx_module
from .external import model_folder
from .graph_reader import GraphReader, clean_name, default_opset
from .specialize import ValueSpecializedPlan
from .static_values import NeedsInputValues
from .grid_readers import GRID_READERS
from .index_readers import INDEX_READERS
from .attention_import import ATTENTION_READERS
from .conv_transpose_readers import CONV_TRANSPOSE_READERS
from .logic_readers import LOGIC_READERS
from .math_readers import MATH_READERS
from .ml_readers import ML_READERS
from .quant_readers import QUANT_READERS
from .loss_readers import LOSS_READERS
from .readers import READERS
from .recurrent_import import RECURRENT_READERS
from .resample_readers import RESAMPLE_READERS
from .sequence_readers import SEQUENCE_READERS
from .spectral_readers import SPECTRAL_READERS
from .state_readers import STATE_READERS
from .vision_readers import VISION_READERS

MAX_FILE_BYTES = 2**31 - 1  # protobuf's own limit for one message

NODE_READERS: dict = {}
"""The one table the importer reads with, ONNX op type (``domain:op`` outside the default
domain) -> reader, one family table per module; a later table's entry replaces an earlier one's.
Every op's cases in onnx's backend suite run in tests/test_onnx_backend_suite.py."""
for _table in (
    READERS,  # shapes, elementwise, conv/pool, norms, reductions, MatMul/Gemm (tests/test_onnx_readers.py)
    CONTROL_READERS,  # If, Loop, Scan: bodies are subgraphs (tests/test_onnx_control.py)
    RECURRENT_READERS,  # RNN, GRU, LSTM as scans (tests/test_onnx_recurrent_import.py)
    ATTENTION_READERS,  # Attention
    LOGIC_READERS,  # Mod, And, Or, Xor, CastLike, Pad (constant)
    RESAMPLE_READERS,  # Pad (all modes), Resize, DepthToSpace, SpaceToDepth (tests/test_onnx_resample_import.py)
    CONV_TRANSPOSE_READERS,  # ConvTranspose (tests/test_onnx_conv_transpose_import.py)
    VISION_READERS,  # pooling, LRN, PRelu, Elu, Selu, ...
    GRID_READERS,  # GridSample, AffineGrid, ScatterElements (tests/test_onnx_grid_scatter_import.py)
    ML_READERS,  # ai.onnx.ml: Binarizer, ArrayFeatureExtractor (tests/test_onnx_sequence_import.py)
    SEQUENCE_READERS,  # Sequence*, ConcatFromSequence, SplitToSequence (tests/test_onnx_sequence_import.py)
    SPECTRAL_READERS,  # DFT, STFT (tests/test_onnx_math_import.py)
    STATE_READERS,  # CausalConvWithState, LinearAttention (tests/test_onnx_state_import.py)
    MATH_READERS,  # trigonometry, Ceil, IsInf/IsNaN, Mean, Size, Swish, Shrink, Einsum, Det, windows
    QUANT_READERS,  # QuantizeLinear, DequantizeLinear, QLinear*, *Integer, BitCast (tests/test_onnx_quant_import.py)
    INDEX_READERS,  # Gather*/Scatter*, OneHot, NonZero, Unique, Tile, Trilu, ... (tests/test_onnx_index_import.py)
    LOSS_READERS,  # NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (tests/test_onnx_losses_import.py)
):
    NODE_READERS.update(_table)


class ModelReader(GraphReader):
    """The reader of a whole model's graph, with every op graphc imports (:data:`NODE_READERS`)."""

    def __init__(self, model, filename: str, budget: int, folder: str | None = None, bound: dict | None = None):
        super().__init__(model, filename, budget, readers=NODE_READERS, folder=folder, bound=bound)


def import_onnx(path, device: str = "cpu", memory_budget=None):
    """The inference ``Plan`` for the ONNX model at ``path`` (what ``gc.load`` returns for it),
    or a ``ValueSpecializedPlan`` when its shapes depend on the values of some of its inputs."""
    where = os.fspath(path)
    return import_model(read_model(where, memory_budget), where, device, memory_budget, folder=model_folder(where))


def import_model(model, where: str = "model.onnx", device: str = "cpu", memory_budget=None, folder=None):
    """:func:`import_onnx` of a ModelProto already in memory (``where`` names it in messages;
    external data is read only from ``folder``, and refused without one)."""
    _check_structure(model, where)

    def build(bound: dict):
        return _plan(model, where, device, memory_budget, bound, folder)

    try:
        return build({})
    except NeedsInputValues as e:
        initializers = {t.name for t in model.graph.initializer}
        inputs = [info.name for info in model.graph.input if info.name not in initializers]
        outputs = [clean_name(info.name, f"output{i}") for i, info in enumerate(model.graph.output)]
        plan = ValueSpecializedPlan(build, inputs, outputs, e.names, device)
        plan.producer = _producer(model, default_opset(model))
        return plan


def _plan(model, where: str, device: str, memory_budget, bound: dict, folder):
    from ..executor import Plan
    from ..executor.run_node import run_graph_node
    from ..random import next_seed
    from ..passes.manager import run_pipeline

    budget = memory_budget or default_budget(NUMPY)  # arrays made while importing are host ones
    reader = ModelReader(model, os.path.basename(where), budget, folder=folder, bound=bound)
    graph = reader.to_graph()
    refuse_oversized(graph, budget)  # before constant folding computes any of it
    graph = run_pipeline(graph, "import", "default", run_graph_node)
    plan = Plan(graph, {}, device=device, seed=next_seed(), kind="inference", memory_budget=memory_budget)
    plan.producer = _producer(model, reader.opset)
    return plan


def _producer(model, opset) -> str:
    """What ``graphc inspect`` shows as the plan's producer."""
    made_by = " ".join(p for p in (model.producer_name, model.producer_version) if p) or "an unnamed producer"
    return clip(f"ONNX opset {opset} from {made_by}", 200)


def refuse_oversized(graph, budget: int) -> None:
    """Every value the graph computes (at batch 1, every symbolic dim 1) must fit the memory budget."""
    for node in graph.nodes:
        for value in node.outputs:
            nbytes = value_bytes(value.type.bind({name: 1 for d in value.type.shape for name in dim_symbols(d)}))
            if nbytes > budget:
                raise GraphcError(f"{value.type} ({nbytes} bytes at batch 1) is over the memory budget of {budget} "
                                  "bytes", node.location())


def read_model(where: str, memory_budget=None):
    """Parse and check the ModelProto in ``where`` without touching any other file."""
    onnx = onnx_module()
    try:
        size = os.stat(where).st_size
        limit = min(MAX_FILE_BYTES, memory_budget or MAX_FILE_BYTES)
        if size > limit:
            raise PlanFormatError(f"{where}: the ONNX file is {size} bytes, over the {limit}-byte limit for one "
                                  "model (protobuf's own limit, or the memory budget)")
        with open(where, "rb") as f:
            data = f.read(size + 1)  # read(n) reserves n bytes first: the file's size, never the 2 GiB limit
    except OSError as e:
        raise GraphcError(f"cannot read {where}: {e.strerror or e}") from None
    if len(data) > size:
        raise PlanFormatError(f"{where}: the ONNX file grew while it was read")
    try:
        model = onnx.ModelProto.FromString(data)
    except Exception as e:  # protobuf's DecodeError: the bytes are not a ModelProto
        raise PlanFormatError(f"{where} is not a valid ONNX model ({type(e).__name__}: {e})") from None
    return model


def _check_structure(model, where: str) -> None:
    """Refuse what graphc will not read: a model without a graph, sparse tensors, local functions, a default-domain opset
    newer than the installed onnx defines. (Each tensor is checked as it is read:
    ``graph_reader.tensor_array``; each node's op version as it is read: ``versions``.)"""
    if not model.HasField("graph"):
        raise PlanFormatError(f"{where} is not an ONNX model: it has no graph")
    if model.functions:
        raise GraphcError(f"{where}: model-local functions ({model.functions[0].name!r}, ...) are not supported")
    version, newest = default_opset(model), onnx_module().defs.onnx_opset_version()
    if version is not None and not 1 <= version <= newest:
        raise GraphcError(f"{where}: ONNX opset {version} is not supported; graphc imports default-domain opsets "
                          f"1-{newest} (the newest the installed onnx {onnx_module().__version__} defines)")
    if model.graph.sparse_initializer:
        raise GraphcError(f"{where}: sparse initializers are not supported")
