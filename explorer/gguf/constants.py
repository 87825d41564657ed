"""GGUF format facts as tables: value types, tensor types and their block sizes, file types, keys.

The numbers are gguf-py's (``gguf/constants.py``, release 0.19.0), which copies
llama.cpp: ``ggml/include/ggml.h`` (``enum ggml_type``), ``ggml/src/ggml.c``
(``type_traits``: block size and bytes per block), ``include/llama.h``
(``enum llama_ftype``) and ``ggml/include/gguf.h`` (value types, magic,
alignment). They are written out here so that reading a header never imports
the ``gguf`` package: it imports numpy, which takes longer (about 0.3 s) than
everything else ``explorer shape`` does. ``tests/gguf/test_constants.py``
checks each table against the installed gguf-py.

A tensor type this table lacks is reported as unknown by the reader; add its
row here when llama.cpp adds one.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "FILE_TYPE_NAMES_BY_VALUE",
    "GGML_QUANT_SIZES",
    "GGUF_DEFAULT_ALIGNMENT",
    "GGUF_MAGIC",
    "KEY_ALIGNMENT",
    "KEY_FILE_TYPE",
    "KEY_SPLIT_COUNT",
    "KEY_SPLIT_NO",
    "KEY_SPLIT_TENSORS_COUNT",
    "GGMLQuantizationType",
    "GGUFValueType",
]

GGUF_MAGIC = 0x46554747  # b"GGUF" read as a little-endian uint32
GGUF_DEFAULT_ALIGNMENT = 32  # bytes; general.alignment overrides it

KEY_ALIGNMENT = "general.alignment"
KEY_FILE_TYPE = "general.file_type"
KEY_SPLIT_NO = "split.no"  # 0-based
KEY_SPLIT_COUNT = "split.count"
KEY_SPLIT_TENSORS_COUNT = "split.tensors.count"


# The format tables stay column-aligned, as gguf-py writes them.
# fmt: off
class GGUFValueType(IntEnum):
    """The type tag of a metadata value (gguf.h ``enum gguf_type``)."""

    UINT8   = 0
    INT8    = 1
    UINT16  = 2
    INT16   = 3
    UINT32  = 4
    INT32   = 5
    FLOAT32 = 6
    BOOL    = 7
    STRING  = 8
    ARRAY   = 9
    UINT64  = 10
    INT64   = 11
    FLOAT64 = 12  # fmt: skip


class GGMLQuantizationType(IntEnum):
    """A tensor's element type (ggml.h ``enum ggml_type``); 4, 5 and 31 to 33 and 36 to 38 were removed."""

    F32     = 0
    F16     = 1
    Q4_0    = 2
    Q4_1    = 3
    Q5_0    = 6
    Q5_1    = 7
    Q8_0    = 8
    Q8_1    = 9
    Q2_K    = 10
    Q3_K    = 11
    Q4_K    = 12
    Q5_K    = 13
    Q6_K    = 14
    Q8_K    = 15
    IQ2_XXS = 16
    IQ2_XS  = 17
    IQ3_XXS = 18
    IQ1_S   = 19
    IQ4_NL  = 20
    IQ3_S   = 21
    IQ2_S   = 22
    IQ4_XS  = 23
    I8      = 24
    I16     = 25
    I32     = 26
    I64     = 27
    F64     = 28
    IQ1_M   = 29
    BF16    = 30
    TQ1_0   = 34
    TQ2_0   = 35
    MXFP4   = 39
    NVFP4   = 40
    Q1_0    = 41  # fmt: skip


_Q = GGMLQuantizationType
#: (block size in weights, bytes per block) of each tensor type (ggml.c type_traits);
#: a tensor of n weights takes n * bytes // block bytes: Q4_K, 144 bytes per 256 weights, is 4.5 bits a weight
GGML_QUANT_SIZES: dict[GGMLQuantizationType, tuple[int, int]] = {
    _Q.F32:     (1, 4),
    _Q.F16:     (1, 2),
    _Q.Q4_0:    (32, 2 + 16),
    _Q.Q4_1:    (32, 2 + 2 + 16),
    _Q.Q5_0:    (32, 2 + 4 + 16),
    _Q.Q5_1:    (32, 2 + 2 + 4 + 16),
    _Q.Q8_0:    (32, 2 + 32),
    _Q.Q8_1:    (32, 4 + 4 + 32),
    _Q.Q2_K:    (256, 2 + 2 + 256 // 16 + 256 // 4),
    _Q.Q3_K:    (256, 2 + 256 // 4 + 256 // 8 + 12),
    _Q.Q4_K:    (256, 2 + 2 + 256 // 2 + 12),
    _Q.Q5_K:    (256, 2 + 2 + 256 // 2 + 256 // 8 + 12),
    _Q.Q6_K:    (256, 2 + 256 // 2 + 256 // 4 + 256 // 16),
    _Q.Q8_K:    (256, 4 + 256 + 256 // 8),
    _Q.IQ2_XXS: (256, 2 + 256 // 4),
    _Q.IQ2_XS:  (256, 2 + 256 // 4 + 256 // 32),
    _Q.IQ3_XXS: (256, 2 + 256 // 4 + 256 // 8),
    _Q.IQ1_S:   (256, 2 + 256 // 8 + 256 // 16),
    _Q.IQ4_NL:  (32, 2 + 16),
    _Q.IQ3_S:   (256, 2 + 256 // 4 + 256 // 8 + 256 // 32 + 4),
    _Q.IQ2_S:   (256, 2 + 256 // 4 + 256 // 16),
    _Q.IQ4_XS:  (256, 2 + 2 + 256 // 2 + 256 // 64),
    _Q.I8:      (1, 1),
    _Q.I16:     (1, 2),
    _Q.I32:     (1, 4),
    _Q.I64:     (1, 8),
    _Q.F64:     (1, 8),
    _Q.IQ1_M:   (256, 256 // 8 + 256 // 16 + 256 // 32),
    _Q.BF16:    (1, 2),
    _Q.TQ1_0:   (256, 2 + 4 * 13),
    _Q.TQ2_0:   (256, 2 + 64),
    _Q.MXFP4:   (32, 1 + 16),
    _Q.NVFP4:   (64, 4 + 32),
    _Q.Q1_0:    (128, 2 + 16),
}

#: ``general.file_type`` value -> llama.h's member name (``enum llama_ftype``, gguf-py LlamaFileType);
#: GUESSED (1024) is not a file type. Values gguf-py comments out are in explorer.gguf.quant.
FILE_TYPE_NAMES_BY_VALUE: dict[int, str] = {
    0:  "ALL_F32",
    1:  "MOSTLY_F16",
    2:  "MOSTLY_Q4_0",
    3:  "MOSTLY_Q4_1",
    7:  "MOSTLY_Q8_0",
    8:  "MOSTLY_Q5_0",
    9:  "MOSTLY_Q5_1",
    10: "MOSTLY_Q2_K",
    11: "MOSTLY_Q3_K_S",
    12: "MOSTLY_Q3_K_M",
    13: "MOSTLY_Q3_K_L",
    14: "MOSTLY_Q4_K_S",
    15: "MOSTLY_Q4_K_M",
    16: "MOSTLY_Q5_K_S",
    17: "MOSTLY_Q5_K_M",
    18: "MOSTLY_Q6_K",
    19: "MOSTLY_IQ2_XXS",
    20: "MOSTLY_IQ2_XS",
    21: "MOSTLY_Q2_K_S",
    22: "MOSTLY_IQ3_XS",
    23: "MOSTLY_IQ3_XXS",
    24: "MOSTLY_IQ1_S",
    25: "MOSTLY_IQ4_NL",
    26: "MOSTLY_IQ3_S",
    27: "MOSTLY_IQ3_M",
    28: "MOSTLY_IQ2_S",
    29: "MOSTLY_IQ2_M",
    30: "MOSTLY_IQ4_XS",
    31: "MOSTLY_IQ1_M",
    32: "MOSTLY_BF16",
    36: "MOSTLY_TQ1_0",
    37: "MOSTLY_TQ2_0",
    38: "MOSTLY_MXFP4_MOE",
    39: "MOSTLY_NVFP4",
    40: "MOSTLY_Q1_0",
}
# fmt: on
