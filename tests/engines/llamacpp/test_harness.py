"""Tests of the llama.cpp measurement harness and the GGUF generator.

Covers `tests/support/llamacpp_measure.py` (log parsing, case matrix) and
`tests/support/llamacpp_models.py` (deterministic GGUF generation), plus consistency
checks of the checked-in `tests/data/llamacpp_measured.json` against the
KV / recurrent-state / output-buffer formulas in docs/notes/llamacpp_memory.md.
Nothing here needs llama_cpp; generation needs gguf-py (a project dependency).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import llamacpp_measure as measure
from support import llamacpp_models as models
from support.corpus import DATA

MEASURED = DATA / "llamacpp_measured.json"
MiB = 1024 * 1024

# Real lines captured from llama.cpp 0c1e57098 (llama-cpp-python 0.3.36),
# CPU backend; gemma3_swa with n_ctx=2048, n_seq_max=4, swa_full=false.
GEMMA3_LOG = """\
llama_context: constructing llama_context
llama_context: n_seq_max             = 4
llama_context: n_ctx                 = 2048
llama_context: n_ctx_seq             = 512
llama_context: n_batch               = 512
llama_context: n_ubatch              = 512
llama_context: causal_attn           = 1
llama_context: flash_attn            = disabled
llama_context: kv_unified            = false
llama_context: n_outputs_max         = 512
llama_context: n_ctx_seq (512) < n_ctx_train (8192) -- the full capacity of the model will not be utilized
done_getting_tensors: tensor 'token_embd.weight' (f16) (and 82 others) cannot be used with preferred buffer type CPU_REPACK, using CPU instead
load_tensors:   CPU_Mapped model buffer size =    36.83 MiB
load_tensors:   CPU_REPACK model buffer size =    10.12 MiB
llama_context:        CPU  output buffer size =     0.25 MiB
llama_kv_cache_iswa: creating non-SWA KV cache, size = 512 cells
llama_kv_cache:        CPU KV buffer size =     2.00 MiB
llama_kv_cache: size =    2.00 MiB (   512 cells,   1 layers,  4/4 seqs), K (f16):    1.00 MiB, V (f16):    1.00 MiB
llama_kv_cache_iswa: creating     SWA KV cache, size = 512 cells
llama_kv_cache:        CPU KV buffer size =    14.00 MiB
llama_kv_cache: size =   14.00 MiB (   512 cells,   7 layers,  4/4 seqs), K (f16):    7.00 MiB, V (f16):    7.00 MiB
sched_reserve:        CPU compute buffer size =    34.00 MiB
sched_reserve: graph: nodes = 375, splits = 1, input objects = 4, input tensors = 9
sched_reserve: reserve took 3.17 ms, sched copies = 1
~llama_context:        CPU compute buffer size is  34.0020 MiB, matches expectation of  34.0020 MiB
"""

# granitehybrid_hybrid, n_ctx=512: one KV cache (2 attention layers) + recurrent state (2 layers)
GRANITE_LOG = """\
llama_kv_cache: the V embeddings have different sizes across layers and FA is not enabled - padding V cache to 128
llama_kv_cache:        CPU KV buffer size =     0.50 MiB
llama_kv_cache: size =    0.50 MiB (   512 cells,   2 layers,  1/1 seqs), K (f16):    0.25 MiB, V (f16):    0.25 MiB
llama_memory_recurrent:        CPU RS buffer size =     0.53 MiB
llama_memory_recurrent: size =    0.53 MiB (     1 cells,   4 layers,  1 seqs  0 rs_seq), R (f32):    0.03 MiB, S (f32):    0.50 MiB, P (f32):    0.00 MiB
"""

# formats printed by older llama.cpp builds (2024-2025), as seen in public logs
OLD_LOG = """\
llm_load_tensors:        CPU buffer size =  4685.30 MiB
llama_kv_cache_init:        CPU KV buffer size =   256.00 MiB
llama_new_context_with_model: KV self size  =  256.00 MiB, K (f16):  128.00 MiB, V (f16):  128.00 MiB
llama_new_context_with_model:        CPU  output buffer size =     0.12 MiB
llama_new_context_with_model:        CPU compute buffer size =   164.01 MiB
llama_new_context_with_model: graph nodes  = 1030
llama_new_context_with_model: graph splits = 1
llama_kv_cache_unified: size =  256.00 MiB (  2048 cells,  32 layers,  1 seqs), K (f16):  128.00 MiB, V (f16):  128.00 MiB
llama_context: n_ctx_per_seq = 2048
sched_reserve: graph (pp bs=512, tg bs=4): nodes = 1030 / 1020, splits = 3 / 2, input objects = 4, input tensors = 6
"""


# -- log parser ----------------------------------------------------------------


def test_parse_buffers_in_log_order():
    p = measure.parse_log(GEMMA3_LOG)
    assert [(b["buffer"], b["mib_str"]) for b in p["model_buffers"]] == [
        ("CPU_Mapped", "36.83"),
        ("CPU_REPACK", "10.12"),
    ]
    assert [b["mib"] for b in p["kv_buffers"]] == [2.0, 14.0]
    assert p["output_buffers"][0]["mib_str"] == "0.25"
    assert p["compute_buffers"][0]["mib"] == 34.0
    # the destructor's 4-decimal figure is a separate record, not a second compute buffer
    assert len(p["compute_buffers"]) == 1
    assert p["compute_exact"][0]["mib_str"] == "34.0020"
    assert p["compute_exact"][0]["expected_mib"] == 34.002


def test_parse_kv_summaries_and_iswa():
    p = measure.parse_log(GEMMA3_LOG)
    base, swa = p["kv_summaries"]
    assert (base["cells"], base["layers"], base["seqs"], base["streams"]) == (512, 1, 4, 4)
    assert (swa["layers"], swa["k"]["mib_str"], swa["type_v"], swa["v"]["mib"]) == (7, "7.00", "f16", 7.0)
    assert p["iswa_cells"] == {"base": 512, "swa": 512}


def test_parse_context_graph_and_notes():
    p = measure.parse_log(GEMMA3_LOG)
    assert p["context"]["n_ctx"] == 2048 and p["context"]["n_ctx_seq"] == 512
    assert p["context"]["flash_attn"] == "disabled"
    assert p["graph"]["nodes"] == [375] and p["graph"]["splits"] == [1]
    assert p["graph"]["sched_copies"] == 1
    assert any("cannot be used with preferred buffer type CPU_REPACK" in n for n in p["notes"])


def test_parse_recurrent_state():
    p = measure.parse_log(GRANITE_LOG)
    rs = p["rs_summaries"][0]
    assert (rs["cells"], rs["layers"], rs["seqs"], rs["rs_seq"]) == (1, 4, 1, 0)
    assert (rs["type_r"], rs["r"]["mib_str"], rs["s"]["mib_str"], rs["p"]["mib"]) == ("f32", "0.03", "0.50", 0.0)
    assert p["rs_buffers"][0]["mib_str"] == "0.53"
    assert any("padding V cache to 128" in n for n in p["notes"])


def test_parse_older_formats():
    p = measure.parse_log(OLD_LOG)
    assert p["model_buffers"][0]["mib_str"] == "4685.30"  # "CPU buffer size" without a kind
    assert p["kv_buffers"][0]["mib"] == 256.0
    assert p["compute_buffers"][0]["mib_str"] == "164.01"
    assert [s["cells"] for s in p["kv_summaries"]] == [None, 2048]  # "KV self size" has no cell count
    assert p["kv_summaries"][1]["streams"] is None  # "1 seqs" without "/streams"
    assert p["context"]["n_ctx_per_seq"] == 2048
    assert p["graph"]["nodes"] == [1030, 1020] and p["graph"]["splits"] == [3, 2]


def test_relevant_lines_leave_out_timing_and_context_block():
    lines = measure.relevant_lines(GEMMA3_LOG)
    assert not any("reserve took" in ln for ln in lines)
    assert not any(ln.startswith("llama_context: n_ctx ") for ln in lines)
    assert (
        "~llama_context:        CPU compute buffer size is  34.0020 MiB, matches expectation of  34.0020 MiB" in lines
    )


def test_parse_log_of_garbage_is_empty():
    p = measure.parse_log("nothing here\nsize = maybe\n")
    assert p["model_buffers"] == [] and p["kv_summaries"] == [] and p["context"] == {}
    assert p["size_lines"] == ["size = maybe"]


# -- case matrix -----------------------------------------------------------------


def test_case_ids_unique_and_constraints_hold():
    cases = measure.build_cases(list(models.SPECS), models.SPECS)
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    for c in cases:
        p = c["params"]
        quant_v = p["type_v"] not in ("f16", "f32")
        if quant_v and p["flash_attn"] != "on":
            assert c["id"].endswith("_expect_error"), c["id"]
        if models.SPECS[c["model"]]["arch"] == "deepseek2" and p["type_k"] != p["type_v"]:
            assert c["id"].endswith("_expect_error"), c["id"]


# -- generator ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    """Every spec's GGUF, written once for this module."""
    pytest.importorskip("gguf")
    return models.write_all(tmp_path_factory.mktemp("gguf"))


@pytest.mark.parametrize("name", list(models.SPECS))
def test_generator_is_deterministic(tmp_path, written, name):
    again = models.write_gguf(models.SPECS[name], tmp_path / f"{name}.gguf")
    assert models.sha256_of(again) == models.sha256_of(written[name])


@pytest.mark.parametrize("name", list(models.SPECS))
def test_file_holds_exactly_the_plan(written, name):
    import gguf

    path = written[name]
    reader = gguf.GGUFReader(str(path))
    got = [(t.name, tuple(int(x) for x in t.shape), t.tensor_type.name, int(t.n_bytes)) for t in reader.tensors]
    want = [(n, s, ty, models.tensor_nbytes(s, ty)) for n, s, ty in models.tensor_plan(models.SPECS[name])]
    assert got == want
    assert reader.fields["general.architecture"].contents() == models.SPECS[name]["arch"]


def test_tensor_nbytes_checks_block_size():
    assert models.tensor_nbytes((512, 128), "Q4_K") == 128 * 2 * 144  # 2 blocks of 256 per row
    assert models.tensor_nbytes((64,), "F32") == 256
    with pytest.raises(ValueError, match="not a multiple of the Q4_K block size"):
        models.tensor_nbytes((64, 8), "Q4_K")


# -- the checked-in measurements ---------------------------------------------------


def _measured() -> dict:
    if not MEASURED.exists():
        pytest.skip(f"{MEASURED} not generated; run python tests/support/llamacpp_measure.py")
    return json.loads(MEASURED.read_text())


def test_measured_specs_match_generator(written):
    doc = _measured()
    assert set(doc["models"]) == set(models.SPECS)
    for name, m in doc["models"].items():
        assert m["spec"] == models.SPECS[name]
        assert models.sha256_of(written[name]) == m["sha256"], f"{name}: regenerate the measurements"
        assert m["file_bytes"] == written[name].stat().st_size


def _pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


# bytes per row of n elements, ggml_row_size (ggml.c type_traits)
_ROW = {"f16": lambda n: 2 * n, "f32": lambda n: 4 * n, "q8_0": lambda n: n // 32 * 34, "q4_0": lambda n: n // 32 * 18}


def _expected_memory(spec: dict, p: dict) -> tuple[int, int, list[tuple[int, int]], int]:
    """(n_ctx, n_ctx_seq, [(kv bytes, cells) per cache], rs bytes) from the source's formulas."""
    n_seq = p["n_seq_max"]
    n_ctx = _pad(p["n_ctx"], 256)  # llama_context ctor: GGML_PAD(n_ctx, 256)
    if p["kv_unified"]:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = _pad(n_ctx // n_seq, 256)
        n_ctx = n_ctx_seq * n_seq
    n_stream = 1 if p["kv_unified"] else n_seq
    fa = p["flash_attn"] in ("on", "auto")  # auto resolves to on for the CPU backend
    n_ubatch = min(p["n_ubatch"], p["n_batch"], n_ctx)
    arch, n_layer = spec["arch"], spec["n_layer"]
    caches: list[tuple[int, int]] = []
    rs = 0
    if arch == "deepseek2":  # MLA: K row = kv_lora_rank + rope dims, no V tensor
        row = _ROW[p["type_k"]](spec["kv_lora_rank"] + spec["qk_rope_head_dim"])
        caches.append((n_layer * row * n_ctx_seq * n_stream, n_ctx_seq))
    elif arch != "mamba2":
        kv_heads = spec["n_head_kv"] if isinstance(spec["n_head_kv"], list) else [spec["n_head_kv"]] * n_layer
        width = [h * spec["head_dim"] for h in kv_heads]
        attn = [il for il in range(n_layer) if kv_heads[il]]
        groups = [(attn, n_ctx_seq)]
        if spec.get("window"):
            pat = spec["swa_pattern"]
            swa = [il for il in attn if il % pat < pat - 1]
            swa_full = True if p["swa_full"] is None else p["swa_full"]  # C API default: true
            size_swa = (
                n_ctx_seq
                if swa_full
                else _pad(min(n_ctx_seq, spec["window"] * (n_seq if p["kv_unified"] else 1) + n_ubatch), 256)
            )
            groups = [([il for il in attn if il not in swa], n_ctx_seq), (swa, size_swa)]
        for layers, cells in groups:
            k = sum(_ROW[p["type_k"]](width[il]) for il in layers)
            # without FA the V cache is transposed and padded to the widest layer
            v = sum(_ROW[p["type_v"]](width[il] if fa else max(width)) for il in layers)
            caches.append(((k + v) * cells * n_stream, cells))
    if arch in ("mamba2", "granitehybrid"):
        n_rec = n_layer if arch == "mamba2" else spec["n_head_kv"].count(0)
        conv = (spec["d_conv"] - 1) * (spec["d_inner"] + 2 * spec["n_group"] * spec["d_state"])
        rs = n_rec * max(1, n_seq) * (conv + spec["d_state"] * spec["d_inner"]) * 4
    return n_ctx, n_ctx_seq, caches, rs


def test_measured_kv_rs_output_match_formulas():
    doc = _measured()
    checked = 0
    for c in doc["cases"]:
        if not c["result"].get("ok"):
            continue
        spec, p, f = doc["models"][c["model"]]["spec"], c["params"], c["figures"]
        n_ctx, n_ctx_seq, caches, rs = _expected_memory(spec, p)
        assert (c["result"]["n_ctx"], c["result"].get("n_ctx_seq", n_ctx_seq)) == (n_ctx, n_ctx_seq), c["id"]
        got = [(s["mib_str"], s["cells"]) for s in f["kv_summaries"]]
        assert got == [(f"{b / MiB:.2f}", cells) for b, cells in caches], c["id"]
        if rs:
            assert f["rs_buffers"][0]["mib_str"] == f"{rs / MiB:.2f}", c["id"]
        # output buffer: logits for one row per sequence (+ embeddings when asked)
        out = spec["vocab"] * p["n_seq_max"] * 4 + (spec["n_embd"] * p["n_seq_max"] * 4 if p["embeddings"] else 0)
        assert f["output_buffers"][0]["mib_str"] == f"{out / MiB:.2f}", c["id"]
        checked += 1
    assert checked > 300


def test_measured_model_buffers_match_tensor_plan():
    doc = _measured()
    for name, m in doc["models"].items():
        plan = models.tensor_plan(m["spec"])
        total = sum(models.tensor_nbytes(s, t) for _, s, t in plan)
        # CPU_REPACK (x86 AVX2): Q4_0/Q4_K matmul weights with a multiple of 8 rows;
        # a tied output (token_embd duplicated as output) counts too
        rep = [(n, s, t) for n, s, t in plan if t in ("Q4_0", "Q4_K") and s[1] % 8 == 0 and n != "token_embd.weight"]
        if m["spec"]["tied_embeddings"] and m["spec"]["types"]["token_embd"] in ("Q4_0", "Q4_K"):
            rep.append(next(x for x in plan if x[0] == "token_embd.weight"))
        repack = sum(models.tensor_nbytes(s, t) for _, s, t in rep)
        in_cpu = total - sum(models.tensor_nbytes(s, t) for n, s, t in rep if n != "token_embd.weight")
        cases = {c["id"].split("/", 1)[1]: c for c in doc["cases"] if c["model"] == name}

        def bufs(tag: str, cases: dict = cases) -> dict[str, str]:
            return {b["buffer"]: b["mib_str"] for b in cases[tag]["figures"]["model_buffers"]}

        # with mmap the mapped range covers every tensor, repacked ones included
        assert bufs("ctx512_faoff_kf16_vf16") == {
            "CPU_Mapped": f"{total / MiB:.2f}",
            "CPU_REPACK": f"{repack / MiB:.2f}",
        }
        assert bufs("ctx512_nommap") == {"CPU": f"{in_cpu / MiB:.2f}", "CPU_REPACK": f"{repack / MiB:.2f}"}
        assert bufs("ctx512_nommap_norepack") == {"CPU": f"{total / MiB:.2f}"}
        assert m["model_size_bytes"] == total
