"""Fuzz: GGUF headers that parse but hold absurd values, through the whole path a GGUF takes.

The byte-level parser has its own hostile-header tests; this suite mutates
*values*. Each case takes one of the generated llama.cpp models
(``support.llamacpp_models.SPECS``: dense GQA, MoE, SWA, MLA, Mamba-2, a
hybrid), built byte by byte with ``support.gguf_factory``, and changes one to
three things: a hyper-parameter to a boundary integer, a NaN or infinite
float, a string, a bool or an array of the wrong length; the architecture (to
rwkv6, mamba, a right-to-left override…); a key removed; the tensors dropped.
The header then goes through the parser, ``read_hparams``, the shape, its
summary, and on every twentieth case a llama.cpp plan with speed on one GPU. Each
case must end in a typed error or figures that are all finite and ≥ 0, in
under ``support.fuzz.CASE_SECONDS``; giant counts are refused before anything
is allocated (the last test measures it).
"""

from __future__ import annotations

import math
import time
import tracemalloc
from functools import partial

import pytest
from support import llamacpp_models as lm
from support.fuzz import FLOATS, INTS, STRINGS, Tally, bad_figures, bounded_memory, cases, rng
from support.gguf_factory import QT, VT, Typed, build_gguf, data_file_size

from explorer.artifacts.offer import build_offer
from explorer.engines.request import PlanRequest
from explorer.errors import GGUFError
from explorer.gguf.header import parse_gguf_header
from explorer.gguf.shape import shape_from_gguf
from explorer.model.summary import shape_summary
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster

#: the hyper-parameters llama.cpp's loader reads (under ``{arch}.``), mutated most often
HPARAMS = (
    "block_count", "embedding_length", "context_length", "feed_forward_length", "vocab_size",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.sliding_window", "attention.sliding_window_pattern", "rope.dimension_count", "rope.freq_base",
    "rope.scaling.type", "rope.scaling.factor", "expert_count", "expert_used_count", "expert_shared_count",
    "expert_feed_forward_length", "expert_shared_feed_forward_length", "leading_dense_block_count",
    "nextn_predict_layers", "attention.key_length_mla", "attention.value_length_mla", "attention.kv_lora_rank",
    "attention.q_lora_rank", "ssm.conv_kernel", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank",
    "ssm.group_count", "wkv.head_size", "token_shift_count", "shortconv.l_cache", "full_attention_interval",
)  # fmt: skip
_KINDS = {"u32": VT.UINT32, "f32": VT.FLOAT32, "str": VT.STRING, "bool": VT.BOOL}
CLUSTER = parse_cluster("1x1xh100-80g")


def base_model(name: str) -> tuple[dict, list]:
    """(metadata, tensors) of a generated model, in gguf_factory's terms, without its token list."""
    spec = lm.SPECS[name]
    md: dict = {"general.architecture": spec["arch"], "general.file_type": 15}
    for key, value, kind in lm._metadata(spec):
        md[key] = Typed(value, VT.ARRAY, VT.INT32) if kind == "arr_u32" else Typed(value, _KINDS[kind])
    md["tokenizer.ggml.model"] = "llama"  # no token list: {arch}.vocab_size says the vocabulary (and it is fast)
    tensors = [(n, shape, int(QT[t])) for n, shape, t in lm.tensor_plan(spec)]
    return md, tensors


BASES = {name: base_model(name) for name in lm.SPECS}


def typed_int(value: int) -> Typed:
    if 0 <= value < 2**32:
        return Typed(value, VT.UINT32)
    if -(2**31) <= value < 0:
        return Typed(value, VT.INT32)
    return Typed(value, VT.UINT64 if value > 0 else VT.INT64)


def f32(value: float) -> float:
    """``value`` as a float32 holds it: past its range, an infinity of the same sign."""
    return math.copysign(math.inf, value) if math.isfinite(value) and abs(value) > 3.4e38 else value


def mutant_value(r, n_layer: int) -> Typed:
    """A hostile value of a random type."""
    kind = r.choice(("int", "int", "int", "float", "float", "str", "bool", "array", "farray"))
    if kind == "int":
        return typed_int(r.choice(INTS))
    if kind == "float":
        vtype = r.choice((VT.FLOAT32, VT.FLOAT64))
        return Typed(r.choice(FLOATS) if vtype == VT.FLOAT64 else f32(r.choice(FLOATS)), vtype)
    if kind == "str":
        return Typed(r.choice(STRINGS), VT.STRING)
    if kind == "bool":
        return Typed(r.random() < 0.5, VT.BOOL)
    length = r.choice((0, 1, n_layer, n_layer, n_layer + 1, 4097))
    if kind == "farray":
        return Typed([f32(r.choice(FLOATS)) for _ in range(length)], VT.ARRAY, VT.FLOAT32)
    values = [v for v in INTS if -(2**31) <= v < 2**31]
    return Typed([r.choice(values) for _ in range(length)], VT.ARRAY, VT.INT32)


def mutate(r) -> tuple[str, bytes, int]:
    """(what was changed, the header bytes, the file size) of one case."""
    name = r.choice(sorted(BASES))
    md, tensors = dict(BASES[name][0]), list(BASES[name][1])
    arch, n_layer = md["general.architecture"], lm.SPECS[name]["n_layer"]
    changes = []
    for _ in range(r.choice((1, 1, 2, 3))):
        what = r.random()
        if what < 0.70:
            key = f"{arch}.{r.choice(HPARAMS)}"
            md[key] = mutant_value(r, n_layer)
            changes.append(f"{key}={_short(md[key])}")
        elif what < 0.78:
            arch = r.choice(STRINGS + ("rwkv6", "rwkv7", "mamba2", "qwen3next", "falcon-h1"))
            md["general.architecture"] = arch
            changes.append(f"arch={arch!r}")
        elif what < 0.86 and len(md) > 2:
            key = r.choice(sorted(k for k in md if k != "general.architecture"))
            del md[key]
            changes.append(f"del {key}")
        elif what < 0.93:
            tensors = [] if r.random() < 0.5 else r.sample(tensors, k=r.randint(0, len(tensors)))
            changes.append(f"{len(tensors)} tensors")
        else:
            md["tokenizer.ggml.tokens"] = [f"t{i}" for i in range(r.choice((0, 1, 7, 300)))]
            changes.append(f"{len(md['tokenizer.ggml.tokens'])} tokens")
    header = build_gguf(md, tensors, with_data=False)
    return f"{name}: {', '.join(changes)}", header, data_file_size(header, tensors)


def _short(t: Typed) -> str:
    v = t.value
    return f"[{len(v)} items]" if isinstance(v, list) else repr(v)[:40]


def run_case(header_bytes: bytes, size: int, with_plan: bool) -> dict:
    """Parse, shape, summarise (and plan with llama.cpp); the figures a user would see."""
    header = parse_gguf_header(header_bytes, file_size=size, name="fuzz-Q4_K_M.gguf")
    shape = shape_from_gguf(header, name="fuzz")
    out = {"summary": shape_summary(shape, context_tokens=4096)}
    if with_plan:
        artifacts = build_offer({"fuzz-Q4_K_M.gguf": size}, gguf_headers={"fuzz-Q4_K_M.gguf": header})
        request = PlanRequest(context_tokens=4096, engines=("llamacpp",))
        out["plan"] = plan(shape, CLUSTER, request, artifacts=artifacts).to_dict()
    return out


def check(out: dict) -> list[str]:
    return bad_figures(out)


def test_the_unmutated_models_plan_cleanly():
    for name, (md, tensors) in BASES.items():
        header = build_gguf(md, tensors, with_data=False)
        out = run_case(header, data_file_size(header, tensors), with_plan=True)
        assert not bad_figures(out), name
        assert out["summary"]["layers"] == lm.SPECS[name]["n_layer"] and out["summary"]["params"] > 0, name


def test_hostile_values_end_in_typed_errors_or_sane_figures():
    r, tally = rng("gguf-values"), Tally("GGUF values")
    with bounded_memory():
        for i in range(cases(600)):
            describe, header, size = mutate(r)
            tally.run(f"case {i}: {describe}", partial(run_case, header, size, with_plan=i % 20 == 0), check)
    print(tally.report())
    assert not tally.failures, tally.report()
    assert tally.results > tally.runs // 10 and sum(tally.typed.values()) > tally.runs // 10  # both kinds seen


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("block_count", 2**32 - 1),
        ("block_count", 10**7),
        ("expert_count", 10**9),
        ("vocab_size", 2**40),
        ("embedding_length", 2**40),
        ("attention.head_count", 2**31),
        ("context_length", 2**62),
        ("attention.key_length", -512),
        ("rope.scaling.factor", math.nan),
        ("rope.freq_base", math.inf),
    ],
)
def test_giant_or_negative_counts_are_refused_before_anything_is_built(key, value):
    md, tensors = BASES["llama_gqa"]
    md = {**md, f"llama.{key}": Typed(value, VT.FLOAT32) if isinstance(value, float) else typed_int(value)}
    if key == "rope.scaling.factor":
        md["llama.rope.scaling.type"] = Typed("yarn", VT.STRING)
    header = build_gguf(md, tensors, with_data=False)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        out = run_case(header, data_file_size(header, tensors), with_plan=True)
        outcome = None
    except GGUFError as e:
        outcome, out = e, None
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    if key == "rope.freq_base":  # llama.cpp reads it, explorer does not size anything with it: figures stay sane
        assert outcome is None and not bad_figures(out)
    else:
        assert outcome is not None, f"{key}={value!r} was accepted"
        assert f"llama.{key}" in str(outcome) and ("plausible maximum" in str(outcome) or "must be" in str(outcome))
    assert elapsed < 2 and peak < 8 * 2**20, (elapsed, peak)  # the header's own size, not layers × 10^7


def test_an_rwkv_header_without_tensors_plans_or_is_refused_typed():
    md = {"general.architecture": "rwkv6", "general.file_type": 15, "rwkv6.block_count": 24,
          "rwkv6.embedding_length": 2048, "rwkv6.wkv.head_size": 64, "rwkv6.context_length": 4096}  # fmt: skip
    header = build_gguf(md, [], with_data=False)
    for cluster in ("1x1xh100-80g", "1x2xh100-80g", "1xcpu-64g"):
        shape = shape_from_gguf(parse_gguf_header(header, file_size=len(header), name="r-Q4_K_M.gguf"), name="r")
        artifacts = build_offer({"r-Q4_K_M.gguf": len(header)}, gguf_headers={"r-Q4_K_M.gguf": shape_header(header)})
        result = plan(shape, parse_cluster(cluster), PlanRequest(engines=("llamacpp",)), artifacts=artifacts)
        assert result.options and not bad_figures(result.to_dict()), cluster  # no division by zero weights


def shape_header(header: bytes):
    return parse_gguf_header(header, file_size=len(header), name="r-Q4_K_M.gguf")
