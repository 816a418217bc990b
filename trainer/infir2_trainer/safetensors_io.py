"""The safetensors format, written and read without the `safetensors` package.

A file is: 8 bytes little-endian header length N, N bytes of JSON header, then the raw tensor bytes.
Header: {"__metadata__": {str: str}, name: {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}},
offsets relative to the end of the header. FP8 E4M3 tensors use dtype "F8_E4M3" (one byte per value), which
we write from uint8 codes so no float8 torch dtype is needed.
"""
import json
import struct

import numpy as np
import torch

from .fp8 import e4m3_from_bytes

_TO_NAME = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64",
            torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}
_NP = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
       "U8": np.uint8, "BOOL": np.bool_, "BF16": np.int16, "F8_E4M3": np.uint8}


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: reinterpret the bits
        t = t.view(torch.int16)
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()


def save_file(tensors: dict, path: str, metadata: dict = None, fp8_names=()):
    """tensors: name -> torch.Tensor. Names in fp8_names hold uint8 E4M3 codes and are written as F8_E4M3."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name]
        dtype = "F8_E4M3" if name in fp8_names else _TO_NAME.get(t.dtype)
        if dtype is None:
            raise ValueError(f"unsupported dtype {t.dtype} for {name}")
        if dtype == "F8_E4M3" and t.dtype != torch.uint8:
            raise ValueError(f"{name}: F8_E4M3 tensors must be passed as uint8 codes")
        data = _tensor_bytes(t)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)  # the reference implementation aligns the data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def read_header(path: str):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: not a safetensors file (too short)")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 * 1024 * 1024:
            raise ValueError(f"{path}: not a safetensors file (header length {n})")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError(f"{path}: corrupt safetensors header") from None
    return header, 8 + n


def load_file(path: str):
    """Returns (tensors, dtypes, metadata). F8_E4M3 tensors come back as uint8 codes (dtype says so); decode them
    with fp8.e4m3_from_bytes or use `load_dequantized`."""
    header, start = read_header(path)
    with open(path, "rb") as f:
        f.seek(start)
        body = f.read()
    metadata = header.pop("__metadata__", {})
    tensors, dtypes = {}, {}
    for name, info in header.items():
        dtype, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in _NP:
            raise ValueError(f"{path}: unsupported dtype {dtype} for {name}")
        if not (0 <= b <= e <= len(body)):
            raise ValueError(f"{path}: corrupt safetensors file (tensor {name} lies outside the data)")
        arr = np.frombuffer(body[b:e], dtype=np.dtype(_NP[dtype]).newbyteorder("<"))
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: corrupt safetensors file (tensor {name} has the wrong size)")
        t = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="))).reshape(shape)
        if dtype == "BF16":
            t = t.view(torch.bfloat16)
        tensors[name], dtypes[name] = t, dtype
    return tensors, dtypes, metadata


def decode(t: torch.Tensor, dtype: str) -> torch.Tensor:
    """Any stored tensor as FP32 values."""
    return e4m3_from_bytes(t) if dtype == "F8_E4M3" else t.float()
