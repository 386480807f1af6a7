"""The convolution filters of an ONNX model, read once so its sessions can share them (issue 13).

Each ONNX Runtime session keeps its own copy of a model's weights: Piper's second session (one
per thread count) cost ~75 MiB of resident memory. A session given a user-owned tensor for an
initializer by ``SessionOptions.add_initializer`` runs on that buffer instead, so every session
built with the same tensors shares one copy.

Only ``Conv`` filters (input 1, used by no other node) are read: 56.7 of the Piper voice's
59.7 MiB. ONNX Runtime puts a shared tensor in place by name once its graph optimizations have
run, so a small constant an optimizer rewrote under the same name (a LayerNorm's gamma, reshaped
by the transpose optimizer) would come back in its old shape and fail the run; Conv filters are
not rewritten in place. ``ConvTranspose`` filters are left out: the kernel runs on a repacked copy
of its own, so a shared one would only be held twice.

The model is read with a few lines of protobuf wire format rather than the ``onnx`` package:
ModelProto.graph (7) -> GraphProto.node (1) / initializer (5) -> NodeProto.input (1) / op_type (4),
TensorProto.dims (1) / data_type (2) / name (8) / raw_data (9) / data_location (14).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

FILTER_OPS = frozenset({"Conv"})
# Ops whose subgraphs could use a graph's initializers unseen by the node walk.
SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan"})
# TensorProto.DataType -> numpy, the float types a filter comes in.
DTYPES: dict[int, type[np.generic]] = {
    1: np.float32,
    10: np.float16,
    11: np.float64,
}

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(
    buf: memoryview, start: int, end: int
) -> Iterator[tuple[int, int, int, int, int]]:
    """(field, wire type, value, start, end) of each field of the message in ``buf[start:end]``.

    A varint's value is its number; a length-delimited field's is its length and
    ``buf[start:end]`` its bytes; fixed-width fields are skipped.
    """
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield field, wire, value, pos, pos
        elif wire == _LEN:
            length, pos = _varint(buf, pos)
            yield field, wire, length, pos, pos + length
            pos += length
        elif wire in (_I64, _I32):
            pos += 8 if wire == _I64 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _text(buf: memoryview, start: int, end: int) -> str:
    return bytes(buf[start:end]).decode()


def _filter_names(buf: memoryview, graph: tuple[int, int]) -> set[str] | None:
    """Names used only as a Conv filter; None: the graph has subgraphs."""
    filters: set[str] = set()
    other: set[str] = set()
    for field, _, _, start, end in _fields(buf, *graph):
        if field != 1:
            continue
        inputs: list[str] = []
        op = ""
        for node_field, _, _, node_start, node_end in _fields(buf, start, end):
            if node_field == 1:
                inputs.append(_text(buf, node_start, node_end))
            elif node_field == 4:
                op = _text(buf, node_start, node_end)
        if op in SUBGRAPH_OPS:
            return None
        for index, name in enumerate(inputs):
            (filters if op in FILTER_OPS and index == 1 else other).add(name)
    return filters - other


def _tensor(
    buf: memoryview, start: int, end: int, names: set[str]
) -> tuple[str, npt.NDArray[Any]] | None:
    """A TensorProto's name and a copy of its data; None unless it is one of ``names`` and
    float raw data."""
    dims: list[int] = []
    dtype: type[np.generic] | None = None
    name: str | None = None
    raw: tuple[int, int] | None = None
    for field, wire, value, field_start, field_end in _fields(buf, start, end):
        if field == 1 and wire == _VARINT:
            dims.append(value)
        elif field == 1:  # packed dims
            pos = field_start
            while pos < field_end:
                dim, pos = _varint(buf, pos)
                dims.append(dim)
        elif field == 2:
            dtype = DTYPES.get(value)
        elif field == 8:
            name = _text(buf, field_start, field_end)
        elif field == 9:
            raw = (field_start, field_end)
        elif field == 14 and value != 0:  # data_location EXTERNAL
            return None
    if name is None or name not in names or dtype is None or raw is None:
        return None
    data = np.frombuffer(buf[raw[0] : raw[1]], dtype=dtype)
    if data.size != int(np.prod(dims)):
        return None
    return name, data.reshape(dims).copy()  # its own aligned buffer, the file freed


def conv_filters(model: str | Path) -> dict[str, npt.NDArray[Any]]:
    """The ``Conv`` filters among ``model``'s initializers, by name."""
    buf = memoryview(Path(model).read_bytes())
    graph = next(
        ((s, e) for f, _, _, s, e in _fields(buf, 0, len(buf)) if f == 7), None
    )
    if graph is None:
        return {}
    names = _filter_names(buf, graph)
    if not names:
        return {}
    filters: dict[str, npt.NDArray[Any]] = {}
    for field, _, _, start, end in _fields(buf, *graph):
        tensor = _tensor(buf, start, end, names) if field == 5 else None
        if tensor is not None:
            filters[tensor[0]] = tensor[1]
    return filters
