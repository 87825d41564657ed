"""The three lessons (notebooks/parallelism.py, quantisation.py, speed.py) run headless with the network
blocked, show the planner's numbers, pass ``marimo check --strict``, and import nothing Pyodide lacks
(altair included: the charts are plain vega-lite dicts).

Each lesson opens on a defaults record (``ParallelDefaults``…) that a test replaces through ``app.run(defs=…)``.
"""

from __future__ import annotations

import html
import importlib.util
import json
import re
import subprocess
import sys
import textwrap

import pytest
from support.corpus import ROOT

from explorer.sources.snapshot.read import load_snapshot
from explorer.ui.parallel_lesson import ParallelDefaults
from explorer.ui.quant_lesson import QuantDefaults
from explorer.ui.serving_lesson import ServingDefaults
from explorer.ui.speed_lesson import SpeedDefaults

NOTEBOOKS = ROOT / "notebooks"
LESSONS = ("parallelism.py", "quantisation.py", "speed.py", "serving.py")
#: packages with no Pyodide wheel (or too heavy for the page): the lessons must not import them. altair is
#: pure Python, but its browser chain (jsonschema, rpds-py, markupsafe) has no wasm wheels in the site's mirror
NOT_IN_THE_BROWSER = (
    "altair",
    "numpy",
    "duckdb",
    "huggingface_hub",
    "gguf",
    "pandas",
    "pyarrow",
    "polars",
    "ipywidgets",
    "httpx",
)


def run(filename: str, **defs):
    """Run a lesson (imported from its file as ``notebook_<name>``); returns (the text it shows, tags stripped,
    and its definitions)."""
    path = NOTEBOOKS / filename
    spec = importlib.util.spec_from_file_location(f"notebook_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    outputs, definitions = module.app.run(defs=defs)
    shown = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    assert "Traceback" not in shown
    return plain_text(shown), definitions


def plain_text(shown: str) -> str:
    """What a reader sees: tags stripped, entities decoded, and callouts' messages (kept in a
    ``data-html`` attribute as a JSON string) decoded the same way."""
    callouts = [json.loads(html.unescape(v)) for v in re.findall(r"data-html='([^']*)'", shown)]
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join([shown, *callouts])))


def test_parallelism_opens_on_qwen_over_four_cards(offline):
    text, defs = run("parallelism.py")
    tensor, pipeline, shape = defs["tensor"], defs["pipeline"], defs["shape"]
    assert shape is load_snapshot().shape("Qwen/Qwen2.5-7B") and defs["cards"].value == 4
    assert tensor.allowed and tensor.layout.tp == 4 and pipeline.layout.pp == 4
    assert "28 query heads / 4 cards = 7 a card; 4 KV heads / 4 cards = 1 a card" in text
    # 2 all-reduces × 28 layers × 2(4 − 1)/4 × 3,584 × 2 bytes
    assert defs["tensor_comms"]["bytes"] == 602_112 and "= 602,112 bytes a card a step" in text
    # the planner's shard of the weights, shown in bytes and GiB
    assert f"{tensor.weights.total_bytes:,} bytes" in text and tensor.weights.total_bytes == 3_808_114_688
    assert pipeline.stages == ((0, 7), (7, 14), (14, 21), (21, 28)) and "0–6, 7–13, 14–20, 21–27" in text
    assert defs["timing"]["micro_batches"] == 1 and "idles 75%" in text  # one sequence: (pp − 1)/pp


def test_parallelism_shows_the_planners_refusal_at_eight_cards(offline):
    text, defs = run("parallelism.py", defaults=ParallelDefaults(cards=8))
    assert defs["tensor"].refusals[0][0] == "attention-heads"
    assert "Total attention heads (28) must be divisible by tensor parallel size (8)" in text
    assert defs["tensor_rows"] == [] and defs["pipeline"].allowed  # pp8 is fine: 28 layers in 8 stages


def test_parallelism_places_experts(offline):
    text, defs = run("parallelism.py", defaults=ParallelDefaults(model="Qwen/Qwen3-30B-A3B", cards=8))
    assert defs["tensor"].layout.ep == 8 and len(defs["experts"]) == 8
    assert defs["experts"][7] == {"card": "card 8", "experts": "112–127", "count": 16}
    assert "128 routed experts a layer and each token uses 8" in text and "112–127" in text


def test_quantisation_opens_on_llama_at_q4_k_m(offline):
    text, defs = run("quantisation.py")
    shape, row = defs["shape"], defs["row"]
    assert defs["chosen"] == "Q4_K_M" and row["bytes"] == shape.weight_bytes("Q4_K_M") == 4_908_867_070
    assert "at 4.89 bits a weight" in text and "4,908,867,070 bytes = 4.57 GiB" in text
    assert "blk.0.attn_q.weight at Q4_K: 16,777,216 / 256 × 144 = 9,437,184 bytes = 4.50 bits a weight" in text
    # llama.cpp's mix, tensor by tensor, and the published file it explains
    assert defs["mix"]["mix_bytes"] == 4_912_898_048 and "4,920,739,168 bytes" in text
    assert "7,841,120 bytes of header" in text
    assert "131,072" in text and "36,864" in text  # bytes a token: bf16 KV and q4_0


def test_quantisation_at_awq_writes_the_scales_out(offline):
    text, defs = run("quantisation.py", defaults=QuantDefaults(precision="int4-awq"))
    assert defs["precision"].name == "int4 AWQ g128"
    assert defs["formula"].endswith("= 8,716,288 bytes = 4.16 bits a weight") and "8,716,288 bytes" in text
    assert defs["mix_name"] == "Q4_K_M"  # a safetensors step still shows llama.cpp's Q4_K_M mix below


def test_quantisation_on_a_model_whose_rows_fall_back(offline):
    text, defs = run("quantisation.py", defaults=QuantDefaults(model="Qwen/Qwen2.5-72B"))
    rules = {(r["tensor"], r["type"]) for r in defs["rules"]}
    assert ("ffn_down", "Q5_0") in rules and ("ffn_down", "Q8_0") in rules
    assert "fallback: 29,568 columns are not whole 256-blocks" in text
    assert defs["mix"]["published"][1] == 47_415_715_488


def test_speed_opens_memory_bound(offline):
    text, defs = run("speed.py")
    step = defs["step"]
    assert (step.batch, step.context_tokens, step.tp) == (1, 1024, 1)
    assert "(15.01 GB weights + 1 × 0.134 GB KV) / 3,350 GB/s = 4.521 ms" in text
    assert "bound by memory" in text and "221.2 tokens/s" in text and "295 FLOPs per byte" in text
    assert len(defs["published"]) == 83 and "1.15× to 18.25×" in text


def test_speed_turns_compute_bound_with_a_big_batch_at_short_context(offline):
    text, defs = run("speed.py", defaults=SpeedDefaults(batch=1024, context_tokens=128))
    assert defs["step"].bound_by == "compute" and "bound by compute" in text
    assert "compute overtakes reading at " in text
    text, defs = run("speed.py", defaults=SpeedDefaults(batch=1024, context_tokens=8192))
    assert defs["step"].bound_by == "memory" and "reading stays the larger at every batch" in text


def test_serving_opens_on_llama_8b_bound_by_the_tpot_target(offline):
    """Llama-3.1-8B bf16 on one H100, prompts 2,000 and answers 500, TPOT 50 ms: the KV cache holds 174
    sequences at 2,500 tokens, the TPOT target stops the batch first, and 200 users need two cards."""
    text, defs = run("serving.py")
    sizing, load = defs["served"].sizing, defs["served"].load
    assert load.capacity == defs["served"].option.evaluation.max_concurrency
    assert sizing.binding == "tpot target" and sizing.largest_batch < load.capacity
    assert load.at(sizing.largest_batch).tpot_s <= 0.050 < load.at(sizing.largest_batch + 1).tpot_s
    assert (sizing.cards, sizing.replicas) == (2, 2)
    assert f"holds {load.capacity:,} sequences at 2,500 tokens" in text
    assert "200 users need 2 h100-80g cards" in text
    users, cards = [r["user_tokens_per_s"] for r in defs["rows"]], [r["gpu_tokens_per_s"] for r in defs["rows"]]
    assert users == sorted(users, reverse=True) and cards == sorted(cards)  # the frontier


def test_serving_sets_the_load_model_against_published_serving_benchmarks(offline):
    """The lesson's last section: every row of data/published_throughput.csv beside its bound and estimate,
    with the kept-out count the closing note quotes."""
    text, defs = run("serving.py")
    published = defs["published"]
    kept = [r for r in published if r["kept_out"]]
    assert len(published) == 66 and all(r["bound_ratio"] >= 1 for r in published)
    assert f"On the {len(kept)} rows kept out of every fit, the estimate lands within 1.5× of 18" in text
    assert "Where the load model meets serving benchmarks" in text


def test_serving_bound_by_the_kv_cache_with_a_loose_target(offline):
    text, defs = run("serving.py", defaults=ServingDefaults(tpot_ms=200, prompt_tokens=16000, answer_tokens=4000))
    assert defs["served"].sizing.binding == "KV capacity" and "stopped by the KV cache" in text


def test_lessons_pass_marimo_check():
    done = subprocess.run(
        [sys.executable, "-m", "marimo", "check", "--strict", *(str(NOTEBOOKS / f) for f in LESSONS)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in (done.stdout + done.stderr).lower()


@pytest.mark.parametrize("filename", LESSONS)
def test_lessons_run_without_what_pyodide_lacks(filename):
    """A fresh interpreter where numpy, duckdb, huggingface_hub, gguf… are absent (``sys.modules[name] = None``,
    as an import of a package without a wheel fails) runs the lesson top to bottom."""
    script = textwrap.dedent(f"""
        import importlib.util, sys
        for name in {NOT_IN_THE_BROWSER!r}:
            sys.modules[name] = None
        spec = importlib.util.spec_from_file_location("lesson", {str(NOTEBOOKS / filename)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        outputs, defs = module.app.run()
        text = "\\n".join(getattr(o, "text", "") for o in outputs if o is not None)
        assert "Traceback" not in text and "ModuleNotFoundError" not in text
        print(len(defs))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
