"""Benchmark the GGUF header reader: ``python -m explorer.bench.gguf``.

Builds (with ``gguf.GGUFWriter``, into a temporary file, header only) a
7B-like llama GGUF with 291 Q4_K/Q6_K/F32 tensors and a synthetic
150,000-token vocabulary with merges, then prints:

1. how much of the file a header read needs (``header_bytes / file_size``)
   and how many range requests a fetcher makes from a 64 KiB first read,
   following ``suggested_fetch_bytes`` or only ``needed_total``;
2. parse time over repeated runs (median and p95).

Numbers are from one run on this machine: ratios and a distribution, not a test.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

from explorer.errors import GGUFNeedMoreBytes
from explorer.gguf.header import GGUFHeader, parse_gguf_header, suggested_fetch_bytes
from explorer.units import KiB, cdiv, mib

QT = gguf.GGMLQuantizationType

# Llama-2-7B's shape (32 blocks × 9 tensors + 3 = 291) with a Qwen-sized vocabulary
HIDDEN, FFN, BLOCKS, VOCAB = 4096, 11008, 32, 150_000


def seven_b_tensors() -> list[tuple[str, tuple[int, ...], QT]]:
    """Names, GGUF-order shapes and types of a Q4_K_M-like 7B llama."""
    out = [("token_embd.weight", (HIDDEN, VOCAB), QT.Q4_K)]
    for b in range(BLOCKS):
        out += [
            (f"blk.{b}.attn_norm.weight", (HIDDEN,), QT.F32),
            (f"blk.{b}.attn_q.weight", (HIDDEN, HIDDEN), QT.Q4_K),
            (f"blk.{b}.attn_k.weight", (HIDDEN, HIDDEN), QT.Q4_K),
            (f"blk.{b}.attn_v.weight", (HIDDEN, HIDDEN), QT.Q6_K),
            (f"blk.{b}.attn_output.weight", (HIDDEN, HIDDEN), QT.Q4_K),
            (f"blk.{b}.ffn_norm.weight", (HIDDEN,), QT.F32),
            (f"blk.{b}.ffn_gate.weight", (HIDDEN, FFN), QT.Q4_K),
            (f"blk.{b}.ffn_up.weight", (HIDDEN, FFN), QT.Q4_K),
            (f"blk.{b}.ffn_down.weight", (FFN, HIDDEN), QT.Q6_K),
        ]
    return out + [("output_norm.weight", (HIDDEN,), QT.F32), ("output.weight", (HIDDEN, VOCAB), QT.Q6_K)]


def synthetic_vocab(rng: random.Random) -> tuple[list[str], list[str]]:
    """150k tokens of 1-16 letters (mean ≈ 7, like BPE vocabularies) and as many merges."""
    letters = "abcdefghijklmnopqrstuvwxyzĠ"
    tokens = ["".join(rng.choices(letters, k=min(16, 1 + int(rng.expovariate(1 / 6))))) for _ in range(VOCAB)]
    merges = [f"{tokens[rng.randrange(VOCAB)]} {tokens[rng.randrange(VOCAB)]}" for _ in range(VOCAB)]
    return tokens, merges


def build_header(path: Path) -> None:
    """Write the header (no tensor data) with gguf-py's own writer."""
    tokens, merges = synthetic_vocab(random.Random(0))
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("bench-7b")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_block_count(BLOCKS)
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(32)
    w.add_head_count_kv(32)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * VOCAB)
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_merges(merges)
    w.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}" * 20)
    for name, shape, qtype in seven_b_tensors():
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        nbytes = int(np.prod(shape)) * type_size // block_size
        w.add_tensor_info(name, tuple(reversed(shape)), np.dtype(np.float32), nbytes, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()


def file_size_of(h: GGUFHeader) -> int:
    """Where the data section ends: the aligned start plus the last tensor's aligned end."""
    end = max(t.offset + t.n_bytes for t in h.tensors)
    return h.data_offset + cdiv(end, h.alignment) * h.alignment


def fetches(data: bytes, first: int, policy: Callable[[GGUFNeedMoreBytes], int]) -> list[int]:
    """Prefix lengths a fetcher asks for, starting at ``first``, until the header parses."""
    asked = [first]
    while True:
        try:
            parse_gguf_header(data[: asked[-1]])
            return asked
        except GGUFNeedMoreBytes as err:
            asked.append(policy(err))


def main() -> int:
    """Print the benchmark."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench-7b-Q4_K_M.gguf"
        build_header(path)
        data = path.read_bytes()
    h = parse_gguf_header(data)
    size = file_size_of(h)
    h = parse_gguf_header(data, file_size=size)
    print(
        f"synthetic 7B GGUF: {len(h.tensors)} tensors, {h.parameter_count:,} weights, {VOCAB:,}-token vocabulary + merges"
    )
    print(f"  file size            {size:>15,} bytes ({mib(size)})")
    print(f"  header_bytes         {h.header_bytes:>15,} bytes ({mib(h.header_bytes)})")
    print(f"  data_offset          {h.data_offset:>15,} bytes")
    print(f"  header / file        {h.header_bytes / size:>15.4%}")

    print("range requests from a 64 KiB first read (prefix lengths asked):")
    for label, policy in (
        ("suggested_fetch_bytes", suggested_fetch_bytes),
        ("needed_total only", lambda e: e.needed_total),
    ):
        asked = fetches(data, 64 * KiB, policy)
        print(
            f"  {label:<22} {len(asked):>3} requests, last {asked[-1]:,} bytes "
            f"({asked[-1] / h.header_bytes:.2f}× the header); re-reading each prefix costs {mib(sum(asked))}"
        )

    prefix = data[: h.header_bytes]
    runs = []
    for _ in range(30):
        t0 = time.perf_counter()
        parse_gguf_header(prefix, file_size=size)
        runs.append(time.perf_counter() - t0)
    runs.sort()
    p95 = runs[min(len(runs) - 1, cdiv(95 * len(runs), 100) - 1)]
    print(f"parse time over {len(runs)} runs ({mib(len(prefix))} header):")
    print(f"  median {statistics.median(runs) * 1e3:.1f} ms, p95 {p95 * 1e3:.1f} ms, min {runs[0] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
