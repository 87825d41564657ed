"""GGUF headers of the `tests/support/llamacpp_models.py` specs, built in memory (no tensor data).

``spec_header(spec)`` packs the same key/values and tensor infos that
``llamacpp_models.write_gguf(spec, path)`` writes (the writer's 32-byte data
alignment included) with ``tests/support/gguf_factory.py``, and parses the bytes with
:func:`explorer.gguf.header.parse_gguf_header`. Building a header takes
milliseconds; writing the files takes seconds and 150 MB.
"""

from __future__ import annotations

from functools import cache

import gguf

from explorer.gguf.header import GGUFHeader, parse_gguf_header
from support import llamacpp_models as models
from support.gguf_factory import Typed, build_gguf, data_file_size

VT = gguf.GGUFValueType
_KINDS = {"u32": VT.UINT32, "f32": VT.FLOAT32, "str": VT.STRING, "bool": VT.BOOL}


def spec_metadata(spec: dict) -> dict:
    """The spec's key/values, typed as the generator writes them."""
    md: dict = {"general.architecture": spec["arch"]}
    for key, value, kind in models._metadata(spec):
        if kind == "arr_u32":
            md[key] = Typed(list(value), VT.ARRAY, VT.INT32)
        else:
            md[key] = Typed(value, _KINDS[kind])
    tokens, scores, types = models._vocab(spec["vocab"])
    md["tokenizer.ggml.model"] = "llama"
    md["tokenizer.ggml.tokens"] = tokens
    md["tokenizer.ggml.scores"] = Typed(scores, VT.ARRAY, VT.FLOAT32)
    md["tokenizer.ggml.token_type"] = Typed(types, VT.ARRAY, VT.INT32)
    return md


def spec_tensors(spec: dict) -> list[tuple[str, tuple[int, ...], int]]:
    """The spec's tensor plan with gguf type ids."""
    return [(n, s, int(gguf.GGMLQuantizationType[t])) for n, s, t in models.tensor_plan(spec)]


@cache
def header_for(name: str) -> GGUFHeader:
    """The parsed header of ``llamacpp_models.SPECS[name]`` (cached)."""
    return spec_header(models.SPECS[name])


def spec_header(spec: dict) -> GGUFHeader:
    """The parsed header of a spec (one of ``llamacpp_models.SPECS``, or a variant of one)."""
    tensors = spec_tensors(spec)
    raw = build_gguf(spec_metadata(spec), tensors, with_data=False)
    return parse_gguf_header(raw, file_size=data_file_size(raw, tensors), name=f"{spec['name']}.gguf")
