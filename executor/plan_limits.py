"""What a plan file may hold (docs/format.md, "Limits"), and safe error messages about it.

The limits are sized from real plans with a wide margin: a 1,000-layer MLP with BatchNorm,
trained with Adam, has 62,062 nodes, 83,083 values, 15,018 state tensors and averages 14
entries and 5 lists or maps per node. They bound what loading can cost: msgpack's own
``max_*_len`` options bound one container at a time, not how many there are (a 16 MB file
of 2**24 empty maps cost 1.2 GB before), so ``plan_unpack`` also counts every field's lists,
maps and entries against these budgets while it unpacks.

``show`` renders untrusted values for error messages: bounded depth and length, no repr()
of anything a file can nest or grow (a 997-deep list made repr() raise RecursionError, and a
16 MB file once produced a 50-million-character message).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.errors import PlanFormatError, clip, show  # noqa: F401  (show: re-exported for the loader)

MAX_NODES = 1 << 17          # twice that 1,000-layer MLP
MAX_VALUES = 1 << 18         # about 1.4 per node in real graphs
MAX_TENSORS = 1 << 16        # state entries plus constants
MAX_RANK = 16
MAX_NAME = 1024              # characters of a value, tensor, state or graph name
MAX_NODE_INPUTS = 4096       # concat is the only variadic op
MAX_NODE_ATTRS = 32          # the most any op has is 7
MAX_NODE_META = 64           # graphc writes up to 6: module, module_type, source, pass, phase, grad_of
MAX_IO = 4096                # graph inputs, outputs, output names
MAX_PARAM_GROUPS = 1024
MAX_SCHEDULERS = 16
MAX_KEYS = 64                # keys of the header, the body and the graph maps
MAX_KEY_BYTES = 256          # one key of those maps, in UTF-8
MAX_DIM_TEXT = 32            # characters of a symbolic dim ("N*4096" is short)
MAX_PRODUCER = 256           # characters
METADATA_ITEMS = 4096        # plan.metadata: list elements plus map entries, at all levels
METADATA_CONTAINERS = 1024
METADATA_DEPTH = 8
MAX_FUNCTIONS = 1024         # custom op bodies (a forward and a backward per traced custom op)
MAX_CALL_DEPTH = 16          # bodies that call bodies: this many levels at most
MAX_EXPANDED = MAX_NODES     # ops one run executes with custom op calls expanded (the plan's size if inlined)
MAX_MESSAGE = 600            # characters of a PlanFormatError message (before the file's path)


@dataclass(frozen=True)
class Limit:
    """What one field may hold: ``length`` entries in one list or map, ``items`` list elements
    and map entries in all, ``containers`` lists and maps in all, ``string`` bytes in one str
    (and in one bin, unless ``binary`` says otherwise), ``depth`` levels of plain data."""
    length: int
    items: int
    containers: int
    string: int = 4096
    binary: int | None = None
    depth: int = 8


@dataclass(frozen=True)
class Stream:
    """A list field read one entry at a time: at most ``count`` entries, each within ``entry``.
    ``zero_copy``: entries are located in Python and unpacked in place (tensors: an Unpacker
    would first copy each bin into its buffer, a third copy of the weights)."""
    count: int
    entry: Limit
    zero_copy: bool = False


BIN = "bin"  # a field located, checked to be a bin and handed over as a view: the body

_SHORT = {"length": 0, "items": 0, "containers": 1}  # a scalar ([] or {} still unpacks, then fails its type check)
HEADER_FIELDS = {
    "magic": Limit(**_SHORT, string=64),
    "format_version": Limit(length=8, items=8, containers=1, string=64),
    "producer": Limit(**_SHORT, string=4 * MAX_PRODUCER),
    "kind": Limit(**_SHORT, string=64),
    "checksum": Limit(**_SHORT, string=128),
    "body": BIN,
    # since 1.3: {size, checksum} of the raw data section after the header (newer keys allowed)
    "data": Limit(length=16, items=16, containers=1, string=128),
}
HEADER_UNKNOWN = Limit(length=64, items=256, containers=16)  # a newer version's header field: small
METADATA = Limit(length=METADATA_ITEMS, items=METADATA_ITEMS, containers=METADATA_CONTAINERS, string=1 << 16,
                 depth=METADATA_DEPTH)
NODE_META = Limit(length=MAX_NODE_META, items=256, containers=16, depth=4)
GRAPH_FIELDS = {
    "name": Limit(**_SHORT, string=MAX_NAME),
    "values": Stream(MAX_VALUES, Limit(length=64, items=128, containers=4, string=MAX_NAME)),
    "inputs": Limit(length=MAX_IO, items=MAX_IO, containers=1),
    "state": Limit(length=MAX_TENSORS, items=3 * MAX_TENSORS, containers=MAX_TENSORS + 1, string=16),
    "constants": Limit(length=MAX_TENSORS, items=MAX_TENSORS, containers=1),
    # one node's entry: inputs (concat), attrs, meta; 64 lists and maps at most, so nothing
    # that decodes a node can recurse deeply
    "nodes": Stream(MAX_NODES, Limit(length=MAX_NODE_INPUTS, items=2 * MAX_NODE_INPUTS + 512, containers=64)),
    "outputs": Limit(length=MAX_IO, items=MAX_IO, containers=1),
    "output_names": Limit(length=MAX_IO, items=MAX_IO, containers=1, string=MAX_NAME),
    "updates": Limit(length=MAX_TENSORS, items=3 * MAX_TENSORS, containers=MAX_TENSORS + 1, string=MAX_NAME),
    # plain data: passes applied, hyper-input names, optimizer groups naming their parameters
    "meta": Limit(length=MAX_TENSORS, items=2 * MAX_TENSORS + 4096, containers=4096),
    # since 1.4: custom op bodies, each a graph map packed into a bin (decoded with BODY_GRAPH_FIELDS);
    # a node names a body by its index, and a body only bodies before it (plan_format.decode_bodies)
    "functions": Stream(MAX_FUNCTIONS, Limit(length=0, items=0, containers=1, binary=-1)),
}
BODY_GRAPH_FIELDS = {k: v for k, v in GRAPH_FIELDS.items() if k != "functions"}
BODY_FIELDS = {
    "graph": GRAPH_FIELDS,
    # a record: {name, dtype, shape, data} and room for a few more keys; data up to the body's size
    "tensors": Stream(MAX_TENSORS, Limit(length=16, items=24, containers=2, string=MAX_NAME, binary=-1),
                      zero_copy=True),
    "param_groups": Limit(length=MAX_PARAM_GROUPS, items=9 * MAX_PARAM_GROUPS, containers=MAX_PARAM_GROUPS + 1,
                          string=64),
    # {type, state}: state lists hold one number per param group
    "lr_schedulers": Limit(length=MAX_PARAM_GROUPS, items=1 << 16, containers=1 << 11, string=256),
    "rng": Limit(length=16, items=16, containers=1, string=64),
    "metadata": METADATA,
}


# ---- messages (clip and show live in ir.errors: the registry quotes untrusted attrs too) -------
FAIL_PREFIX = "invalid plan file: "


def fail(message: str):
    raise PlanFormatError(f"{FAIL_PREFIX}{clip(message, MAX_MESSAGE)}")
