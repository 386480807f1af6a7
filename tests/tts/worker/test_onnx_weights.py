"""Reading an ONNX model's convolution filters without the ``onnx`` package (issue 13)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tts.worker.engines.onnx_weights import conv_filters


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes | int) -> bytes:
    """One protobuf field: a varint for an int, length-delimited for bytes."""
    if isinstance(payload, int):
        return varint(number << 3) + varint(payload)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def tensor(
    name: str, array: np.ndarray, *, packed: bool = False, external: bool = False
) -> bytes:
    """A TensorProto with raw data; ``external``: marked as stored in another file."""
    if packed:
        dims = field(1, b"".join(varint(d) for d in array.shape))
    else:
        dims = b"".join(field(1, d) for d in array.shape)
    dtype = {np.float32: 1, np.int64: 7}[array.dtype.type]
    location = field(14, 1) if external else b""
    return (
        dims
        + field(2, dtype)
        + field(8, name.encode())
        + field(9, array.tobytes())
        + location
    )


def node(op: str, *inputs: str) -> bytes:
    return b"".join(field(1, i.encode()) for i in inputs) + field(4, op.encode())


def model(tmp_path: Path, nodes: list[bytes], tensors: list[bytes]) -> Path:
    graph = b"".join(field(1, n) for n in nodes) + b"".join(
        field(5, t) for t in tensors
    )
    path = tmp_path / "model.onnx"
    path.write_bytes(field(1, 8) + field(7, graph))  # ir_version, graph
    return path


W = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
U = np.arange(6, dtype=np.float32).reshape(3, 2, 1)


def test_conv_filters_are_read_with_their_shapes(tmp_path: Path) -> None:
    path = model(
        tmp_path,
        [
            node("Conv", "x", "w", "b"),
            node("Conv", "y", "u"),
            node("ConvTranspose", "z", "t"),
        ],
        [
            tensor("w", W),
            tensor("u", U, packed=True),
            tensor("b", W[0, 0]),
            tensor("t", U),
        ],
    )

    filters = conv_filters(path)

    assert sorted(filters) == ["u", "w"]  # not the bias, nor a repacked filter
    np.testing.assert_array_equal(filters["w"], W)
    np.testing.assert_array_equal(filters["u"], U)
    assert all(a.flags.owndata and a.flags.aligned for a in filters.values())


def test_a_filter_any_other_node_uses_is_left_to_the_session(tmp_path: Path) -> None:
    path = model(
        tmp_path,
        [node("Conv", "x", "w"), node("Mul", "w", "z"), node("Conv", "x", "v")],
        [tensor("w", W), tensor("v", W)],
    )

    assert sorted(conv_filters(path)) == ["v"]


def test_external_integer_and_subgraph_models_share_nothing(tmp_path: Path) -> None:
    external = model(
        tmp_path,
        [node("Conv", "x", "w"), node("Conv", "x", "i")],
        [tensor("w", W, external=True), tensor("i", np.arange(3, dtype=np.int64))],
    )
    assert conv_filters(external) == {}

    with_if = model(
        tmp_path, [node("Conv", "x", "w"), node("If", "c")], [tensor("w", W)]
    )
    assert conv_filters(with_if) == {}
