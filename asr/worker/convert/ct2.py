"""Read a CTranslate2 ``model.bin`` (binary version 6) without CTranslate2 (engines.md §4.1).

Little-endian: u32 version, str spec name, u32 revision, u32 variable count; per variable: str
name, u8 rank, rank × u32 dims, u8 dtype id, u32 byte count, raw bytes; then u32 alias count and
(alias, target) string pairs. A str is a u16 length (NUL included), the UTF-8 bytes and a NUL.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BINARY_VERSION = 6
# CTranslate2's DataType ids (ctranslate2/specs/model_spec.py); bfloat16 is read as uint16 bits.
DTYPES = {0: "<f4", 1: "i1", 2: "<i2", 3: "<i4", 4: "<f2", 5: "<u2"}
FLOAT_DTYPES = (0, 4, 5)
BFLOAT16 = 5


class Ct2FormatError(ValueError):
    """The file is not a CTranslate2 model this reader understands."""


@dataclass(frozen=True)
class Variable:
    """One stored variable: a weight tensor or a scalar setting."""

    name: str
    dtype_id: int
    shape: tuple[int, ...]
    data: bytes = field(repr=False)

    @property
    def is_float(self) -> bool:
        """True for float32, float16 and bfloat16 storage."""
        return self.dtype_id in FLOAT_DTYPES

    def array(self) -> np.ndarray:
        """The values in their stored type (bfloat16 widened to float32)."""
        raw = np.frombuffer(self.data, dtype=DTYPES[self.dtype_id])
        if self.dtype_id == BFLOAT16:
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        return raw.reshape(self.shape)

    def scalar(self) -> int:
        """The value of a rank-0 integer setting."""
        if self.shape:
            raise Ct2FormatError(f"{self.name} is not a scalar")
        return int(self.array().reshape(-1)[0])


@dataclass(frozen=True)
class Ct2Model:
    """Every variable of a model file by name, and its aliases (alias → target)."""

    spec: str
    revision: int
    variables: dict[str, Variable]
    aliases: dict[str, str]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def take(self, fmt: str) -> int:
        try:
            (value,) = struct.unpack_from("<" + fmt, self.data, self.offset)
        except struct.error:
            raise Ct2FormatError("truncated model file") from None
        self.offset += struct.calcsize("<" + fmt)
        return int(value)

    def raw(self, size: int) -> bytes:
        if self.offset + size > len(self.data):
            raise Ct2FormatError("truncated model file")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def text(self) -> str:
        chunk = self.raw(self.take("H"))
        if not chunk or chunk[-1] != 0:
            raise Ct2FormatError("string without its NUL terminator")
        return chunk[:-1].decode("utf-8")


def read_ct2(path: Path) -> Ct2Model:
    """Parse ``path`` completely; fail on an unknown version, dtype or trailing bytes."""
    reader = _Reader(path.read_bytes())
    version = reader.take("I")
    if version != BINARY_VERSION:
        raise Ct2FormatError(f"binary version {version}, expected {BINARY_VERSION}")
    spec, revision = reader.text(), reader.take("I")
    variables: dict[str, Variable] = {}
    for _ in range(reader.take("I")):
        name = reader.text()
        shape = tuple(reader.take("I") for _ in range(reader.take("B")))
        dtype_id = reader.take("B")
        if dtype_id not in DTYPES:
            raise Ct2FormatError(f"{name}: unknown dtype id {dtype_id}")
        data = reader.raw(reader.take("I"))
        expected = (
            int(np.prod(shape, dtype=np.int64)) * np.dtype(DTYPES[dtype_id]).itemsize
        )
        if len(data) != expected or name in variables:
            raise Ct2FormatError(f"{name}: bad size or duplicate name")
        variables[name] = Variable(name, dtype_id, shape, data)
    aliases = {reader.text(): reader.text() for _ in range(reader.take("I"))}
    if reader.offset != len(reader.data):
        raise Ct2FormatError("trailing bytes after the alias table")
    return Ct2Model(spec, revision, variables, aliases)
