"""explorer.ui.engine_settings: the app's settings come from PlanRequest's own fields."""

from __future__ import annotations

import dataclasses

import pytest

from explorer.engines.request import PlanRequest
from explorer.engines.setting import declared_settings, launch_flags, setting
from explorer.errors import PlanError
from explorer.ui import engine_settings as es


def test_every_request_field_but_the_main_controls_is_a_setting():
    fields = {f.name for f in dataclasses.fields(PlanRequest)}
    assert {s.field for s in es.SETTINGS} == fields - {
        "context_tokens",
        "concurrency",
        "kv_dtype",
        "precision",
        "engines",
        "calibrations",  # measured from the user's logs (explorer check --calibrate), not a box
    }
    keys = [s.key for s in es.SETTINGS]
    assert len(keys) == len(set(keys))  # one URL key each


def test_the_flags_the_issue_lists():
    by_flag = {s.flag: s for s in es.SETTINGS}
    for flag in ("--gpu-memory-utilization", "--mem-fraction-static", "--max-num-seqs", "--max-num-batched-tokens",
                 "--chunked-prefill-size", "-fa", "-ngl", "--tensor-split", "-b", "-ub", "--load-mode none",
                 "--no-cpu-offload", "--tensor-parallel-size", "--swap-space", "--enable-hierarchical-cache"):  # fmt: skip
        assert flag in by_flag
    assert by_flag["-ngl"].engines == ("llamacpp",) and by_flag["--gpu-memory-utilization"].engines == ("vllm",)
    assert by_flag["--mem-fraction-static"].optional and es.placeholder(by_flag["--mem-fraction-static"]) == (
        "engine's default"
    )


def test_texts_become_request_changes():
    changes, errors = es.request_changes(
        {
            "gpu-memory-utilization": "0.85",
            "ngl": "20",
            "tensor-split": "3,1",
            "load-mode-none": "on",
            "flash-attn": "off",
            "max-num-seqs": "",
            "batch": "2048",
        }
    )
    assert changes == {
        "gpu_memory_utilization": 0.85,
        "n_gpu_layers": 20,
        "tensor_split": (3.0, 1.0),
        "mmap": False,  # --load-mode none on
        "flash_attn": "off",
    }  # an empty box and the default batch change nothing
    assert errors == []
    request = dataclasses.replace(PlanRequest(), **changes)
    assert request.n_gpu_layers == 20 and request.mmap is False


def test_issue_15_flags_reach_the_request():
    """--no-cpu-offload turns cpu_offload off; tp, pp and --swap-space are read as the CLI reads them."""
    changes, errors = es.request_changes({"no-cpu-offload": "on", "tp": "4", "pp": "2", "swap-space": "8"})
    assert errors == []
    assert changes == {
        "cpu_offload": False,
        "tensor_parallel_size": 4,
        "pipeline_parallel_size": 2,
        "swap_space_gib": 8.0,
    }
    request = dataclasses.replace(PlanRequest(), **changes)
    assert request.world_size == 8  # 4 × 2
    assert es.settings_text({"no-cpu-offload": "on", "tp": "4"}) == "--no-cpu-offload --tensor-parallel-size 4"


def test_bad_texts_are_named_not_applied():
    changes, errors = es.request_changes(
        {"gpu-memory-utilization": "1.5", "ngl": "many", "flash-attn": "maybe", "enable-dp-attention": "perhaps"}
    )
    assert changes == {}
    assert errors == [
        "--gpu-memory-utilization: 1.5 is out of range: it must be a finite number from 0.01 to 1",
        "-ngl: 'many' is not a whole number",
        "-fa: 'maybe' is not one of auto, on, off",
        "--enable-dp-attention: 'perhaps' is not on or off",
    ]
    with pytest.raises(PlanError, match="not a finite number"):
        es.read_text(es.SETTINGS_BY_KEY["host-fraction"], "nan")


def test_flags_text_and_groups():
    assert es.settings_text(
        {"ngl": "20", "load-mode-none": "on", "gpu-memory-utilization": "0.85", "tensor-split": "3,1"}
    ) == ("--gpu-memory-utilization 0.85 -ngl 20 --tensor-split 3,1 --load-mode none")  # llama.cpp's --no-mmap
    groups = es.engine_groups()
    assert list(groups) == ["vLLM", "SGLang", "vLLM and SGLang", "llama.cpp", "Planning"]
    assert [s.key for s in groups["vLLM"]] == [
        "gpu-memory-utilization",
        "max-num-seqs",
        "max-num-batched-tokens",
        "swap-space",
        "vllm-version",
    ]
    assert [s.key for s in groups["Planning"]] == ["no-cpu-offload", "host-fraction"]  # explorer's own, no flag


def test_a_new_request_field_appears_by_itself():
    """A setting another issue declares on PlanRequest is settable and carried in the URL with no app change."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Wider(PlanRequest):
        kv_offload: bool = setting(True, kind="bool", inverted=True, cli=("--no-kv-offload",), launch="echo",
                                   flags={"llamacpp": "--no-kv-offload"}, help="KV cache in host memory")  # fmt: skip
        tp_size: int | None = setting(kind="int", optional=True, low=1, high=8, cli=("--tp-size",), help="tp")

    made = [s for s in declared_settings(Wider) if s.field in ("kv_offload", "tp_size")]
    assert [(s.key, s.engines, s.kind, s.optional) for s in made] == [
        ("no-kv-offload", ("llamacpp",), "bool", False),
        ("tp-size", (), "int", True),
    ]
    assert made[0].parse("on") is False and made[1].parse("4") == 4 and made[1].parse("") is None
    with pytest.raises(PlanError, match="tp_size is 9; it must be a whole number from 1 to 8"):
        Wider(tp_size=9)
    assert launch_flags(Wider(kv_offload=False), "llamacpp") == ["--no-kv-offload"]


def test_reading_the_file_is_llama_cpps_own_flag_and_an_old_links_key_still_works():
    """llama.cpp 0c1e57098 has no --no-mmap (tests/data/engine_args/llamacpp.json): the app shows and writes
    --load-mode none under the key load-mode-none; a link written before, with no-mmap=on, still turns mmap off."""
    setting = es.SETTINGS_BY_KEY["load-mode-none"]
    assert (setting.field, setting.flag, setting.inverted) == ("mmap", "--load-mode none", True)
    assert "no-mmap" not in es.SETTINGS_BY_KEY and all(s.flag != "--no-mmap" for s in es.SETTINGS)
    assert es.request_changes({"no-mmap": "on"}) == ({"mmap": False}, [])
    assert es.request_changes({"no-mmap": "off"}) == ({}, [])  # mmap stays on, the default
    assert es.settings_text({"no-mmap": "on"}) == "--load-mode none"
    # both keys in one link: the new one wins
    assert es.canonical_settings({"no-mmap": "on", "load-mode-none": "off", "ngl": "3"}) == {
        "load-mode-none": "off",
        "ngl": "3",
    }
