"""explorer.sources.checkpoints and sources.hub.tree: a model's published quantised checkpoints.

The Hub's model tree is served by the project's test Hub (``GET /api/models?filter=...``
over each repo's ``.model_info.json`` tags and config); the shipped list is data/checkpoints.json.
"""

from __future__ import annotations

from support.hub_fixtures import make_repo

from explorer.sources.cache.store import Cache
from explorer.sources.checkpoints import id_spellings, published_checkpoints, shipped_checkpoints
from explorer.sources.hub.settings import HubSettings
from explorer.sources.hub.tree import fetch_model_tree

BASE = "acme/Llama-9B"
INSTRUCT = "acme/Llama-9B-Instruct"


def _info(tags: list[str], config: dict | None = None) -> dict:
    return {".model_info.json": {"tags": tags, **({"config": config} if config else {})}}


def tree(root):
    """A base model whose own quants are one GGUF repo; its Instruct model has the AWQ and FP8 quants."""
    make_repo(root, BASE, {"config.json": {"model_type": "llama"}})
    make_repo(root, INSTRUCT, {"config.json": {}, **_info([f"base_model:finetune:{BASE}"])})
    make_repo(
        root,
        "quants/Llama-9B-GGUF",
        {
            "Llama-9B-Q4_K_M.gguf": b"\0" * 700,
            "Llama-9B-Q8_0-00001-of-00002.gguf": b"\0" * 500,
            "Llama-9B-Q8_0-00002-of-00002.gguf": b"\0" * 400,
            "mmproj-Llama-9B-f16.gguf": b"\0" * 9,
            **_info([f"base_model:quantized:{BASE}", "gguf"]),
        },
    )
    awq = {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    make_repo(
        root, "quants/Llama-9B-Instruct-AWQ", {"config.json": {}, **_info([f"base_model:quantized:{INSTRUCT}"], awq)}
    )
    fp8 = {"quantization_config": {"quant_method": "fp8"}}
    make_repo(
        root, "quants/Llama-9B-Instruct-FP8", {"config.json": {}, **_info([f"base_model:quantized:{INSTRUCT}"], fp8)}
    )
    make_repo(root, "other/unrelated", {"config.json": {}, **_info(["base_model:quantized:someone/else"], awq)})


def test_the_model_tree_walks_from_a_base_model_to_its_instruct_quants(tmp_path, new_hub_server):
    tree(tmp_path)
    server = new_hub_server(tmp_path)
    found = {c.repo: c for c in fetch_model_tree(BASE, settings=HubSettings.resolve(endpoint=server.endpoint))}
    assert set(found) == {"quants/Llama-9B-GGUF", "quants/Llama-9B-Instruct-AWQ", "quants/Llama-9B-Instruct-FP8"}
    gguf = found["quants/Llama-9B-GGUF"]
    assert (gguf.format, gguf.stands_in, gguf.base_model, gguf.verified) == ("gguf", False, BASE, "hub")
    # sizes from one listing: Q8_0's two parts summed (500 + 400), the projector left out
    assert {(f.name, f.quant, f.size_bytes) for f in gguf.files} == {
        ("Llama-9B-Q4_K_M.gguf", "Q4_K_M", 700),
        ("Llama-9B-Q8_0-00001-of-00002.gguf", "Q8_0", 900),
    }
    awq = found["quants/Llama-9B-Instruct-AWQ"]
    assert (awq.format, awq.bits, awq.stands_in, awq.base_model) == ("awq", 4, True, INSTRUCT)
    assert found["quants/Llama-9B-Instruct-FP8"].format == "fp8"
    # requests: the base's quants, its fine-tunes, the Instruct's quants, one listing of the GGUF repo
    assert server.stats.total_requests("/api/models") == 4


def test_a_hub_answer_is_cached_and_a_failing_hub_falls_back_to_the_shipped_list(
    tmp_path, new_hub_server, closed_port_endpoint
):
    tree(tmp_path / "hub")
    server = new_hub_server(tmp_path / "hub")
    with Cache.open(tmp_path / "cache.duckdb") as cache:
        first = published_checkpoints(BASE, settings=HubSettings.resolve(endpoint=server.endpoint), cache=cache)
        assert first.origin == "hub" and len(first.checkpoints) == 3
        server.reset_stats()
        again = published_checkpoints(BASE, settings=HubSettings.resolve(endpoint=server.endpoint), cache=cache)
        assert again.origin == "cache" and server.stats.total_requests() == 0
        assert {c.repo for c in again.checkpoints} == {c.repo for c in first.checkpoints}
        assert all(c.source == "cache" for c in again.checkpoints)
    down = HubSettings.resolve(endpoint=closed_port_endpoint, timeout_s=2)
    fallback = published_checkpoints("meta-llama/Meta-Llama-3.1-70B", settings=down)
    assert fallback.origin == "shipped" and "could not be read" in fallback.note
    assert "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4" in {c.repo for c in fallback.checkpoints}
    offline = published_checkpoints("meta-llama/Meta-Llama-3.1-70B", settings=down, offline=True)
    assert offline.origin == "shipped" and offline.note == ""


def test_the_shipped_list_knows_both_spellings_of_a_renamed_id():
    assert id_spellings("meta-llama/Meta-Llama-3.1-8B") == {"meta-llama/meta-llama-3.1-8b", "meta-llama/llama-3.1-8b"}
    old, new = shipped_checkpoints("meta-llama/Meta-Llama-3.1-8B"), shipped_checkpoints("meta-llama/Llama-3.1-8B")
    assert old and {c.repo for c in old} == {c.repo for c in new}
    # the base id's AWQ is the Instruct model's, marked as standing in; Qwen3-8B's own AWQ is not
    awq = [c for c in old if c.format == "awq"]
    assert awq and all(c.stands_in for c in awq)
    qwen = [c for c in shipped_checkpoints("Qwen/Qwen3-8B") if c.format == "awq"]
    assert [c.repo for c in qwen] == ["Qwen/Qwen3-8B-AWQ"] and not qwen[0].stands_in
    assert shipped_checkpoints("nobody/nothing") == ()


def test_snapshot_checkpoints_rewrites_the_shipped_list_from_the_tree(tmp_path, new_hub_server, capsys, monkeypatch):
    from explorer.cli import main

    tree(tmp_path / "hub")
    server = new_hub_server(tmp_path / "hub")
    repos, out = tmp_path / "repos.txt", tmp_path / "checkpoints.json"
    repos.write_text(f"{BASE}  # the one model\n")
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    status = main(["snapshot", "checkpoints", "--repos", str(repos), "--out", str(out)])
    assert status == 0 and "read the model tree of 1 of 1 models" in capsys.readouterr().out
    import json

    entries = {e["repo"]: e for e in json.loads(out.read_text())["entries"]}
    awq = entries["quants/Llama-9B-Instruct-AWQ"]
    assert (awq["base_model"], awq["also_base_of"], awq["verified"]) == (INSTRUCT, [BASE], "hub")
    assert "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4" in entries  # the shipped entries are kept


def test_a_modelopt_fp8_quant_in_the_tree_is_per_tensor_and_a_block_one_stays_block():
    from explorer.sources.hub.tree import classify

    def listed(qc: dict):
        return classify({"id": "nvidia/X-FP8", "config": {"quantization_config": qc}}, BASE, stands_in=False)

    modelopt = listed({"quant_method": "modelopt", "quant_algo": "FP8"})
    assert (modelopt.format, modelopt.scheme, modelopt.what_if_name) == (
        "fp8",
        "tensor-modelopt",
        "fp8-tensor-modelopt",
    )
    nvfp4 = listed({"quant_method": "modelopt", "quant_algo": "NVFP4"})
    assert (nvfp4.format, nvfp4.scheme) == ("nvfp4", "block")
    block = listed({"quant_method": "fp8", "weight_block_size": [128, 128]})
    assert (block.format, block.what_if_name) == ("fp8", None)
