"""The zip archive and the safetensors member, read as hostile input: the file's kind from
its first bytes, the member list (names, methods, declared sizes, ratios), a member read in
chunks up to a limit, the safetensors header checked entry by entry, and the tensors read
straight into their own memory."""
from __future__ import annotations

import json
import math
import os
import zipfile

import torch

from attnlab.core.errors import NetworkError
from .format import GRAPH_FILE, WEIGHTS_FILE
from .messages import _show
from .schema import LIMITS, _bad, _int, _keys, _kind, _parse_json

_CHUNK = 1 << 20
_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
           "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
           "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def _members(z: zipfile.ZipFile, f, where: str):
    infos = z.infolist()
    names = [i.filename for i in infos]
    if GRAPH_FILE not in names:
        if any(n.endswith(".pkl") or n.endswith("/data.pkl") for n in names):
            raise NetworkError(
                f"cannot load '{where}': it is a torch.save file (a pickle inside a zip). "
                "attnlab never unpickles (a pickle can run any code). Load it with torch "
                "yourself if you trust it, then save it with net.save().")
        raise NetworkError(f"cannot load '{where}': it is a zip file without "
                           f"'{GRAPH_FILE}', so not an attnlab network file.")
    unexpected = [n for n in names if n not in (GRAPH_FILE, WEIGHTS_FILE)]
    if unexpected or len(names) != len(set(names)) or len(names) > LIMITS["members"]:
        what = (f"unexpected member {_show(repr(unexpected[0]))}" if unexpected
                else "a member that appears twice")
        raise NetworkError(f"cannot load '{where}': the zip holds {what}; an attnlab network file "
                           f"holds only {GRAPH_FILE} and {WEIGHTS_FILE}. Nothing was read from "
                           "it (a file that carries other members was not written by attnlab).")
    f.seek(0, os.SEEK_END)
    file_bytes = f.tell()
    for info in infos:
        member = f"member {info.filename}"
        if info.flag_bits & 0x1:
            raise NetworkError(f"cannot load '{where}': {member} is encrypted.")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise NetworkError(f"cannot load '{where}': {member} uses compression method "
                               f"{info.compress_type}; attnlab writes only stored or deflated "
                               "members.")
        if info.compress_size > file_bytes:
            raise NetworkError(f"cannot load '{where}': {member} declares {info.compress_size:,} "
                               f"stored bytes, but the whole file has {file_bytes:,}. The file is "
                               "damaged or forged.")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise NetworkError(f"cannot load '{where}': {member} is stored uncompressed but "
                               f"declares {info.file_size:,} bytes unpacked and "
                               f"{info.compress_size:,} stored. The file is damaged or forged.")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > LIMITS["ratio_floor"] and ratio > LIMITS["ratio"]:
            raise NetworkError(f"cannot load '{where}': {member} would unpack to "
                               f"{info.file_size:,} bytes from {info.compress_size:,} "
                               f"({ratio:,.0f}× — over the limit of {LIMITS['ratio']}×): a "
                               "decompression bomb, not a network.")
    by_name = {i.filename: i for i in infos}
    return by_name[GRAPH_FILE], by_name.get(WEIGHTS_FILE)


def _read_member(z, info, limit: int, where: str) -> bytes:
    """The member's bytes, refused before reading when it declares more than `limit` and
    read in chunks (zipfile stops at the declared size and checks the CRC)."""
    if info.file_size > limit:
        raise NetworkError(f"cannot load '{where}': {info.filename} is {info.file_size:,} bytes, "
                           f"over the limit of {limit:,} (attnlab.io.LIMITS). Nothing was "
                           "unpacked; raise the limit if you trust this file.")
    out = bytearray()
    with z.open(info) as m:
        while True:
            chunk = m.read(min(_CHUNK, limit + 1 - len(out)))
            if not chunk:
                break
            out += chunk
            if len(out) > limit:
                raise NetworkError(f"cannot load '{where}': {info.filename} unpacks to more than "
                                   f"{limit:,} bytes (attnlab.io.LIMITS).")
    return bytes(out)



def _what_is(raw: bytes, f=None) -> str:
    if not raw:
        return "the file is empty."
    if raw[:1] == b"\x80" and len(raw) > 1 and raw[1] <= 5:
        return ("it is a pickle file. attnlab never unpickles (a pickle can run any code): "
                "save networks with net.save() and load them with al.load().")
    if raw[:8] == b"\x89HDF\r\n\x1a\n":
        return "it is an HDF5 file (a Keras model?), not an attnlab network file."
    if raw[:8] == b"\x08\x07\x12\x07" or raw[:2] == b"\x08\x07" or raw[:2] == b"\x08\x08":
        return "it looks like an ONNX model; attnlab reads only files written by net.save()."
    if len(raw) > 8 and raw[8:9] == b"{" and f is not None:
        return _what_safetensors(raw, f)
    return "it is not an attnlab network file (those are zip archives written by net.save())."


def _what_safetensors(raw: bytes, f) -> str:
    """A safetensors file: a training checkpoint (say how to resume) or bare weights."""
    n = int.from_bytes(raw[:8], "little")
    meta: dict = {}
    if n <= LIMITS["header_bytes"]:
        f.seek(8)
        try:
            header = json.loads(f.read(n).decode("utf-8"))
            meta = header.get("__metadata__") or {} if isinstance(header, dict) else {}
        except (UnicodeDecodeError, ValueError, RecursionError):
            meta = {}
    if isinstance(meta, dict) and "attnlab.training" in meta:
        return ("it is an attnlab training checkpoint, not a saved network: a checkpoint holds "
                "the weights and the training state but not the graph. Resume training with "
                "the network it was trained with: al.train(net, X, Y, options=al.TrainingOptions("
                "checkpoint_dir=<its folder>, resume=True)); after training, net.save(path) "
                "writes a file that al.load() reads.")
    return ("it is a safetensors file (weights only, no graph). Build the network in Python and "
            "copy them in with safetensors.torch.load_file() and net.load_state_dict(), or load "
            "a file written by net.save().")



def _header(z, info, where):
    """The safetensors header of `info`, checked: (entries in offset order, data start)."""
    at = f"{WEIGHTS_FILE} (not a valid safetensors file) header"
    with z.open(info) as m:
        raw = m.read(8)
        if len(raw) < 8:
            raise NetworkError(f"cannot load '{where}': {WEIGHTS_FILE} is truncated.")
        n = int.from_bytes(raw, "little")
        if n > LIMITS["header_bytes"] or 8 + n > info.file_size:
            raise NetworkError(f"cannot load '{where}': {WEIGHTS_FILE} is not a valid safetensors "
                               f"file: its header declares {n:,} bytes (the member has "
                               f"{info.file_size:,}; the limit is {LIMITS['header_bytes']:,}).")
        text = m.read(n)
    header = _parse_json(text, where, at)
    if not isinstance(header, dict):
        raise _bad(where, at, f"expected a JSON object, found {_kind(header)}")
    meta = header.pop("__metadata__", None)
    if meta is not None and (not isinstance(meta, dict) or not all(
            isinstance(v, str) for v in meta.values())):
        raise _bad(where, f"{at}.__metadata__", "expected an object of strings")
    entries, data_bytes = [], info.file_size - 8 - n
    for key, e in header.items():
        here = f"{at}.{_show(key, 60)}"
        _keys(e, where, here, ("dtype", "shape", "data_offsets"))
        if e["dtype"] not in _DTYPES:
            raise _bad(where, f"{here}.dtype", f"{_show(repr(e['dtype']))} is not one of "
                                               f"{', '.join(_DTYPES)}")
        shape, offs = e["shape"], e["data_offsets"]
        if not isinstance(shape, list) or len(shape) > 16:
            raise _bad(where, f"{here}.shape", "expected a list of at most 16 sizes")
        for i, s in enumerate(shape):
            _int(s, where, f"{here}.shape[{i}]", 0, 2**62)
        if not isinstance(offs, list) or len(offs) != 2:
            raise _bad(where, f"{here}.data_offsets", "expected [start, end]")
        a, b = (_int(o, where, f"{here}.data_offsets", 0, data_bytes) for o in offs)
        nbytes = math.prod(shape) * _DTYPES[e["dtype"]].itemsize
        if b - a != nbytes:
            raise _bad(where, here, f"shape {shape} of {e['dtype']} needs {nbytes:,} bytes, its "
                                    f"offsets give {b - a:,}")
        entries.append((a, b, key, tuple(shape), _DTYPES[e["dtype"]]))
    entries.sort()
    pos = 0
    for a, b, key, _, _ in entries:
        if a != pos:
            raise _bad(where, at, f"tensor {_show(repr(key))} starts at byte {a:,}, expected "
                                  f"{pos:,} (tensors overlap or leave gaps)")
        pos = b
    if pos != data_bytes:
        raise _bad(where, at, f"the tensors cover {pos:,} bytes of the {data_bytes:,} after the "
                              "header")
    return entries, 8 + n



def _read_tensors(z, info, entries, start) -> dict[str, torch.Tensor]:
    """Reads each tensor straight into its own memory, in chunks (no copy of the member)."""
    out = {}
    with z.open(info) as m:
        _skip(m, start)
        for a, b, key, shape, dtype in entries:
            t = torch.empty(shape, dtype=dtype)
            if b > a:
                view = t.reshape(-1).view(torch.uint8).numpy().data     # a memoryview
                pos = 0
                while pos < len(view):
                    n = m.readinto(view[pos:pos + 16 * _CHUNK])
                    if not n:
                        raise EOFError(f"{WEIGHTS_FILE} ends inside tensor {key!r}")
                    pos += n
            out[key] = t
    return out


def _skip(m, n):
    while n > 0:
        chunk = m.read(min(n, _CHUNK))
        if not chunk:
            raise EOFError(f"{WEIGHTS_FILE} is truncated")
        n -= len(chunk)

