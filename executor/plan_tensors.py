"""Reading a plan file's tensor table (serialize.py reads the rest): each record's name,
dtype, shape and byte count checked against the graph's types before its array is built, as a
view of the data section (1.3 on) or a copy of its inline bytes (1.0 to 1.2); bools and the
narrow integer types (int4, uint4, int2, uint2) checked for bytes they cannot hold."""
from __future__ import annotations

import numpy as np

from ..ir.types import DType
from .plan_data import Placer
from .plan_format import DTYPES, MAX_DIM, expect, field, is_int
from .plan_limits import MAX_RANK, fail, show

_NARROW_INT_BITS = {DType.int4: 4, DType.uint4: 4, DType.int2: 2, DType.uint2: 2}


def _check_narrow_ints(array: np.ndarray, dtype: DType, name: str) -> None:
    """ml_dtypes keeps an int4 (uint4, int2, uint2) in the low bits of a byte, the rest zero."""
    bits = _NARROW_INT_BITS.get(dtype)
    if bits is not None and array.size and array.view(np.uint8).max() >= 2**bits:
        fail(f"tensor {show(name)} is {dtype.name} but holds bytes over {2**bits - 1}")


def decode_tensors(count: int, records, expected: dict, data: memoryview | None = None) -> dict:
    """Check every record (name, dtype allowlist, shape, byte count, and its place in the data
    section ``data`` if the file has one) against the graph's ``expected`` types before building
    its array; records arrive one at a time. Without a data section (1.0 to 1.2) each record
    holds its bytes, copied into a new array; with one, arrays are views of it."""
    if count != len(expected):
        fail(f"{count} tensors stored, the graph needs {len(expected)}")
    placer = None if data is None else Placer(data)
    arrays = {}
    for k, rec in enumerate(records):
        where = f"tensor {k}"
        expect(rec, dict, where)
        name = field(rec, "name", str, where)
        if name in arrays:
            fail(f"duplicate tensor name {show(name)}")
        if name not in expected:
            fail(f"tensor {show(name)} is not a state entry or constant of the graph")
        dtype = field(rec, "dtype", str, where)
        if dtype not in DTYPES:
            fail(f"tensor {show(name)} has dtype {show(dtype)}, not one of {sorted(DTYPES)}")
        shape = field(rec, "shape", list, where)
        if len(shape) > MAX_RANK:  # before the product below (a million dims is a million-digit int)
            fail(f"tensor {show(name)} has rank {len(shape)} (at most {MAX_RANK})")
        count = 1
        for d in shape:
            if not (is_int(d) and 0 <= d <= MAX_DIM):
                fail(f"tensor {show(name)} has a bad dim {show(d)}")
            count *= d  # Python ints: no overflow
        want = expected[name]
        if tuple(shape) != want.shape or DTYPES[dtype] is not want.dtype:
            fail(f"tensor {show(name)} is {dtype}{shape}, the graph says {want}")
        np_dtype = DTYPES[dtype].numpy.newbyteorder("<")
        _one_byte_source(rec, name, placer is not None)
        if placer is not None:
            array = placer.view(rec, name, np_dtype, shape, count * np_dtype.itemsize)
        else:
            raw = field(rec, "data", bytes, where)
            if count * np_dtype.itemsize != len(raw):
                fail(f"tensor {show(name)}: shape {shape} x {np_dtype.itemsize} bytes != {len(raw)} bytes of data")
            array = np.frombuffer(raw, dtype=np_dtype).astype(DTYPES[dtype].numpy).reshape(shape)
        if array.dtype == np.bool_ and array.size and array.view(np.uint8).max() > 1:
            fail(f"tensor {show(name)} is bool but holds bytes other than 0 and 1")
        _check_narrow_ints(array, DTYPES[dtype], name)
        arrays[name] = array
    if placer is not None:
        placer.finish()
    return arrays


def _one_byte_source(rec: dict, name: str, has_section: bool) -> None:
    """A record's bytes are in the data section (1.3: ``offset``, ``nbytes``) or inline (1.0 to
    1.2: ``data``), never both: a loader that read one and ignored the other would let two
    readers of the same file see different weights."""
    if has_section and "data" in rec:
        fail(f"tensor {show(name)} has inline 'data' in a file with a data section: a record's bytes are in one "
             f"place, since format 1.3 the data section (at 'offset'), so two sources of bytes are refused")
    if not has_section and ("offset" in rec or "nbytes" in rec):
        fail(f"tensor {show(name)} has an offset, but the file has no data section (before format 1.3, a "
             f"record holds its bytes in 'data')")
