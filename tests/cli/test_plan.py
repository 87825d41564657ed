"""``explorer plan`` through the real CLI: configs, GGUF files, snapshot ids, JSON fields."""

from __future__ import annotations

import json
import re

import pytest
from support import llamacpp_models
from support.corpus import CONFIGS

from explorer.cli import main


def out_first_line(text: str) -> str:
    """The first ranked row of a printed plan, its number and label (the figures cut off)."""
    row = next(line for line in text.splitlines() if line.startswith("  1 "))
    return re.split(r"\s{2,}", row.strip())[0]


def _json(capsys, *argv):
    status = main(["plan", *argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_json_has_the_promised_fields(capsys):
    status, out = _json(
        capsys,
        str(CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json"),
        "--cluster",
        "1x2xh100-80g",
        "--context",
        "8192",
        "--engine",
        "vllm",
    )
    assert status == 0 and set(out) >= {"model", "options", "rejected"}
    opt = out["options"][0]
    for key in (
        "engine",
        "gpu_class",
        "nodes",
        "gpus_per_node",
        "tp",
        "pp",
        "dp",
        "ep",
        "fits",
        "free_now",
        "hosts",
        "max_context",
        "max_concurrency",
        "command",
        "decode_tokens_per_s",
        "time_to_first_token_s",
    ):
        assert key in opt
    card = opt["per_card"]
    assert {"weights", "kv_cache", "activations", "overhead", "total", "usable"} <= set(card)
    assert all(isinstance(card[k], int) for k in ("weights", "kv_cache", "activations", "overhead", "total", "usable"))
    assert card["total"] == card["weights"] + card["kv_cache"] + card["activations"] + card["overhead"]
    assert card["kv_cache"] == 8192 * 131_072
    assert opt["command"].startswith("vllm serve")


def test_a_local_gguf_plans_with_llamacpp_only(capsys, tmp_path):
    path = tmp_path / "tiny-Q4_K_M.gguf"
    llamacpp_models.write_gguf(llamacpp_models.SPECS["llama_gqa"], str(path))
    status, out = _json(capsys, str(path), "--cluster", "1xcpu-8g", "--context", "2048")
    assert status == 0
    assert {o["engine"] for o in out["options"]} == {"llamacpp"}
    # the file by its path, as the plan was made from it (issue 24: a local model's command names where it is)
    assert out["options"][0]["command"].startswith(f"llama-server -m {path.resolve()} -c 2048")
    assert out["pruned"]["format"] == 2  # vLLM and SGLang serve safetensors, not GGUF


def test_a_local_config_launches_from_its_folder_or_a_placeholder(capsys, tmp_path):
    """issue 24: a plan of ``Qwen__Qwen3-8B.json`` printed ``vllm serve Qwen__Qwen3-8B``, the file's stem, which
    vLLM looks up on the Hub. A model folder is named by its path; a lone config file by a visible placeholder."""
    text = (CONFIGS / "Qwen__Qwen3-8B.json").read_text()
    (tmp_path / "Qwen__Qwen3-8B.json").write_text(text)
    (tmp_path / "Qwen3-8B").mkdir()
    (tmp_path / "Qwen3-8B" / "config.json").write_text(text)
    args = ("--cluster", "1x1xh100-80g", "--engine", "vllm")
    _, lone = _json(capsys, str(tmp_path / "Qwen__Qwen3-8B.json"), *args)
    _, folder = _json(capsys, str(tmp_path / "Qwen3-8B"), *args)
    assert lone["options"][0]["command"].startswith(
        "vllm serve <the folder with Qwen__Qwen3-8B's config.json and weights> "
    )
    assert folder["options"][0]["command"].startswith(f"vllm serve {(tmp_path / 'Qwen3-8B').resolve()} ")


def test_pinned_replicas_print_a_line_each_with_devices_and_ports(capsys):
    """issue 24: ``--gpus l40s-48g#0:2,l40s-48g#0:3 --replicas 2`` printed the same command twice."""
    status = main(["plan", "Qwen/Qwen3-8B", "--offline", "--cluster", "1x4xl40s-48g",
                   "--gpus", "l40s-48g#0:2,l40s-48g#0:3", "--replicas", "2"])  # fmt: skip
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if "vllm serve" in line]
    assert status == 0 and len(lines) == 2
    assert lines[0].startswith("l40s-48g#0: CUDA_VISIBLE_DEVICES=2 vllm serve Qwen/Qwen3-8B ")
    assert lines[1].startswith("l40s-48g#0: CUDA_VISIBLE_DEVICES=3 vllm serve Qwen/Qwen3-8B ")
    assert lines[0].endswith("--port 8000") and lines[1].endswith("--port 8001")


def test_snapshot_id_offline_and_sort_by_speed(capsys):
    status, out = _json(
        capsys, "Qwen/Qwen3-8B", "--offline", "--cluster", "1x8xh100-80g", "--engine", "vllm", "--sort", "speed"
    )
    speeds = [o["decode_tokens_per_s"]["estimate"] for o in out["options"]]
    assert status == 0 and speeds == sorted(speeds, reverse=True)


def test_nothing_fits_exits_3_and_says_why(capsys):
    status = main(
        [
            "plan",
            str(CONFIGS / "meta-llama__Meta-Llama-3.1-405B.json"),
            "--cluster",
            "1x1xrtx4090-24g",
            "--engine",
            "vllm",
        ]
    )
    out = capsys.readouterr().out
    assert status == 3 and "no way fits" in out and "memory-lower-bound" in out


@pytest.mark.parametrize("spec", ["2x8xnot-a-class", "0x8xh100-80g", "1x8xh100-80g@bad fabric"])
def test_bad_cluster_specs_exit_2(spec, capsys):
    assert main(["plan", str(CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json"), "--cluster", spec]) == 2
    assert "explorer plan:" in capsys.readouterr().err


def test_pinned_gpus_report_the_overcommit(capsys):
    status = main(
        [
            "plan",
            str(CONFIGS / "meta-llama__Meta-Llama-3.1-70B.json"),
            "--cluster",
            "1x8xl40s-48g",
            "--gpus",
            "0,1",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    card = out["option"]["per_card"]
    assert status == 3 and out["overcommit_bytes"] == card["total"] - card["usable"] > 0
    assert "overcommits" in out["message"]


def test_pinning_a_gguf_file_checks_llamacpp(capsys, tmp_path):
    """A GGUF file pinned without --engine is llama.cpp's (it printed `vllm serve file.gguf` before); --engine vllm
    on a GGUF is refused as vLLM serves safetensors."""
    path = tmp_path / "tiny-Q4_K_M.gguf"
    llamacpp_models.write_gguf(llamacpp_models.SPECS["llama_gqa"], str(path))
    status = main(["plan", str(path), "--cluster", "1x2xl4-24g", "--gpus", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0 and out["option"]["engine"] == "llamacpp"
    assert out["option"]["command"].startswith(f"llama-server -m {path.resolve()} ")
    assert out["launch"][0].startswith(f"l4-24g#0: CUDA_VISIBLE_DEVICES=0 llama-server -m {path.resolve()} ")
    assert main(["plan", str(path), "--cluster", "1x2xl4-24g", "--gpus", "0", "--engine", "vllm"]) == 2
    assert "vllm serves safetensors weights, not gguf" in capsys.readouterr().err


def test_request_flags_reach_the_engines(capsys):
    status, out = _json(
        capsys,
        str(CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json"),
        "--cluster",
        "1x8xh100-80g",
        "--engine",
        "vllm",
        "--engine",
        "sglang",
        "--tp",
        "2",
        "--max-num-seqs",
        "64",
        "--max-num-batched-tokens",
        "4096",
        "--chunked-prefill-size",
        "4096",
        "--cuda-graph-max-bs",
        "32",
        "--enforce-eager",
    )
    assert status == 0 and {o["tp"] for o in out["options"]} == {2}
    commands = {o["engine"]: o["command"] for o in out["options"]}
    assert "--max-num-seqs 64 --max-num-batched-tokens 4096 --enforce-eager" in commands["vllm"]
    assert "--chunked-prefill-size 4096 --cuda-graph-max-bs 32 --disable-cuda-graph" in commands["sglang"]
    assert all("memory_text" in o and isinstance(o["total_on_cards"], int) for o in out["options"])


def test_no_cpu_offload_flag(capsys):
    status, out = _json(
        capsys,
        str(CONFIGS / "meta-llama__Meta-Llama-3.1-70B.json"),
        "--cluster",
        "1x2xl40s-48g",
        "--engine",
        "llamacpp",
        "--no-cpu-offload",
        "--quant",
        "bf16",  # the model's own weights: no quantised fallback
    )
    assert status == 3 and not out["options"] and "cpu-offload" in out["pruned"]


def test_a_what_if_awq_plan_loads_a_published_awq_checkpoint(capsys, offline):
    """Issue 13 §4: ``--quant int4-awq`` on the 70B never prints ``vllm serve meta-llama/Meta-Llama-3.1-70B``."""
    status, out = _json(
        capsys, "meta-llama/Meta-Llama-3.1-70B", "--offline", "--cluster", "1x2xl40s-48g", "--context", "32768",
        "--quant", "int4-awq",
    )  # fmt: skip
    assert status == 0
    vllm = next(o for o in out["options"] if o["engine"] == "vllm")
    assert vllm["repo"] == "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4" and vllm["what_if"]
    assert vllm["command"].startswith("vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 ")
    assert any("stands in for meta-llama/Meta-Llama-3.1-70B" in n for n in vllm["notes"])
    assert all("serve meta-llama/Meta-Llama-3.1-70B " not in o["command"] for o in out["options"])


def test_the_default_plan_of_a_70b_on_two_l40s_loads_a_published_awq_checkpoint(capsys, offline):
    """No --quant: the bf16 weights keep no all-GPU layout, so the plan widens to the published quantised ones and its
    first row is vLLM tp 2 on hugging-quants' AWQ checkpoint (its repository in the command, never the bf16 one)."""
    args = ["plan", "meta-llama/Meta-Llama-3.1-70B", "--offline", "--cluster", "1x2xl40s-48g", "--context", "32768"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert out_first_line(captured.out) == "1 vLLM · 2 × l40s-48g (tp2) · int4 AWQ g128"
    assert "also planned: " in captured.err and "(choose one with --quant)" in captured.err
    assert "vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4" in captured.out
    assert "stands in for meta-llama/Meta-Llama-3.1-70B" in captured.out


def test_deepseek_r1_on_a100s_with_sglang_says_why_its_fp8_weights_are_not_offered(capsys, offline):
    """SGLang has no block-FP8 kernel on Ampere (its docs: a BF16 conversion or INT8 on A100s): the note says so
    and the plan widens to the published AWQ, INT8 and BF16 checkpoints; no command loads the FP8 original."""
    args = ["plan", "deepseek-ai/DeepSeek-R1", "--offline", "--cluster", "4x8xa100-80g@ib0", "--engine", "sglang"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "; sglang has no fp8-block kernel for ampere cards (a100-80g)" in captured.err
    assert "meituan/DeepSeek-R1-Channel-INT8 (int8 per-channel), unsloth/DeepSeek-R1-BF16 (bf16)" in captured.err
    assert "--model-path deepseek-ai/DeepSeek-R1 " not in captured.out
    status, out = _json(capsys, "deepseek-ai/DeepSeek-R1", "--offline", "--cluster", "4x8xa100-80g@ib0", "--engine",
                        "sglang")  # fmt: skip
    assert status == 0 and "unsloth/DeepSeek-R1-BF16 (bf16)" in out["widened"]
    assert any(r["rule"] == "weights-unsupported" for r in out["rejected"])


def test_the_table_fits_120_columns_by_tier_and_wide_shows_every_column(capsys):
    args = ["plan", "meta-llama/Meta-Llama-3.1-405B", "--offline", "--cluster", "2x8xh100-80g@ib0"]
    assert main(args) == 0
    text = capsys.readouterr().out
    table = [line for line in text.splitlines() if line[:3].strip().isdigit() or line.startswith("  # ")]
    assert table and max(len(line) for line in table) <= 120
    assert "tier 1: every layer on accelerators" in text and "tier 2:" in text and "tier 3: CPU only" in text
    # SGLang tp 16 and vLLM tp 8 × pp 2 both spend the 16 cards; SGLang's tensor-parallel group pays its 252
    # all-reduces a token over InfiniBand (150 µs each in practice, docs/notes/speed_model.md), so vLLM's
    # pipeline across the nodes is #1 and SGLang's tp 16 is its best
    assert "(tp8 pp2)" in text and "best SGLang: #2 SGLang · 2 nodes × 8 h100-80g on ib0 (tp16)" in text
    assert main([*args, "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "max conc" in wide and "$/Mtok" in wide and "original (bf16)" in wide


def test_goal_and_the_deprecated_sort(capsys):
    config = str(CONFIGS / "meta-llama__Meta-Llama-3.1-70B.json")
    status, out = _json(capsys, config, "--cluster", "1x8xh100-80g", "--engine", "vllm", "--goal", "fastest")
    assert status == 0 and out["goal"] == "fastest" and out["options"][0]["tp"] == 8
    assert main(["plan", config, "--cluster", "1x8xh100-80g", "--engine", "vllm", "--sort", "speed", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["goal"] == "fastest" and "--sort speed is deprecated" in captured.err


def test_the_kvplan_case_prints_the_refusal_context_and_suggestions(capsys):
    args = ["plan", "meta-llama/Meta-Llama-3.1-8B", "--offline", "--cluster", "1x1xl4-24g"]
    args += ["--context", "131072", "--gpu-memory-utilization", "0.92"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "(max context 30,928)" in text  # vLLM 0.26: tests/plan/test_longest_context.py works it out
    # the bf16 weights keep no layout on the L4 alone, so the plan also holds the quantised fallbacks: a Q4_K_M
    # GGUF (4.3 GiB + 16.0 GiB of f16 KV) holds one sequence, at the brim, so its q8_0 KV cache (8.5 GiB) is
    # planned too and is the first all-GPU row; the suggestions stay about the own weights
    assert out_first_line(text) == "1 llama.cpp · 1 × l4-24g (single, q8_0 KV) · Q4_K_M"
    assert "to keep every layer on accelerators with the model's own weights:" in text
    assert "an fp8 KV cache" in text and "1x2xl4-24g: fits (tier 1)" in text
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    refusal = next(x for x in out["rejected"] if x["engine"] == "vllm")
    assert refusal["max_context"] == 30_928 and isinstance(refusal["per_card"]["total"], int)
    kinds = {s["kind"] for s in out["suggestions"]}
    assert {"kv-cache", "context", "cluster", "precision"} <= kinds
    assert out["widened"] and out["options"][0]["tier"] == 1
    assert {o["tier"] for o in out["options"] if "Q4_K_M" not in o["label"] and "Q3_K_M" not in o["label"]} <= {2, 3}


def test_json_gives_a_launch_over_nodes_a_command_a_node(capsys):
    """405B over two 8 × H100 nodes: the option's command is the head's; ``node_commands`` the other rank's; the
    replica launch places both (devices, the head's port, the head node named as the master's address)."""
    status, out = _json(capsys, "meta-llama/Meta-Llama-3.1-405B", "--offline", "--cluster", "2x8xh100-80g@ib0",
                        "--engine", "vllm")  # fmt: skip
    opt = next(o for o in out["options"] if o["tp"] == 8 and o["pp"] == 2)
    assert status == 0 and opt["command"].endswith(
        "--nnodes 2 --node-rank 0 --master-addr <head-node> --master-port 29501"
    )
    (worker,) = opt["node_commands"]
    assert worker["rank"] == 1 and worker["command"].endswith(
        "--node-rank 1 --master-addr <head-node> --master-port 29501 --headless"
    )
    head, other = opt["replica_launch"]["lines"]
    assert head.startswith("h100-80g@ib0#0: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 vllm serve ")
    assert head.endswith("--master-addr <h100-80g@ib0#0> --master-port 29501 --port 8000")
    assert other.startswith("h100-80g@ib0#1: ") and other.endswith(
        "--master-addr <h100-80g@ib0#0> --master-port 29501 --headless"
    )


def test_the_text_shows_the_best_options_notes_as_the_json_has_them(capsys):
    """Issue 24: SGLang's "all N GPUs combined need at least X GiB" reached only the JSON."""
    argv = [str(CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json"), "--cluster", "1x2xl4-24g", "--engine", "sglang",
            "--tp", "2", "--offline"]  # fmt: skip
    status, out = _json(capsys, *argv)
    notes = out["options"][0]["notes"]
    combined = [n for n in notes if "all 2 GPUs combined need at least" in n]
    assert status == 0 and len(combined) == 1 and "each card needs 83 % of its memory allocatable" in combined[0]
    assert main(["plan", *argv]) == 0
    text = capsys.readouterr().out
    best = text[text.index("\nbest: ") :]
    assert all(f"  note: {n}\n" in best for n in notes)


def test_an_unknown_chip_is_a_did_you_mean_and_insisting_plans_with_the_assumptions_said(capsys):
    """Issue 24: ``1x1xm3-pro-36g`` was planned silently as a discrete 36 GiB card with 72 GiB of assumed host RAM."""
    model = str(CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json")
    assert main(["plan", model, "--cluster", "1x1xm3-pro-36g", "--offline"]) != 0
    err = capsys.readouterr().err
    assert "did you mean m3-max-36g, m4-max-36g, uma-36g" in err and "m3-pro-36g:36GiB" in err
    assert main(["plan", model, "--cluster", "1x1xm3-pro-36g:36GiB", "--offline"]) == 0
    out = capsys.readouterr().out
    assumed = out.splitlines()[1]
    assert assumed.startswith(
        "assumed: m3-pro-36g:36864MiB is not in the catalogue: planned as a discrete card of 36.0"
    )
    assert "of unknown memory bandwidth and TFLOPs (no speed estimate)" in assumed
    assert "its node's host RAM is assumed: 72 GiB (max(64 GiB, 2 × its GPU memory); state it with ram=)" in assumed
    status, data = _json(capsys, model, "--cluster", "1x1xm3-pro-36g:36GiB", "--offline")
    assert status == 0 and data["assumed"] == [assumed.removeprefix("assumed: ")]
