"""CUDA out-of-memory errors: the figures PyTorch prints, in both of its forms, read as printed."""

from __future__ import annotations

import pytest

from explorer.engines.logs import read_engine_log
from explorer.engines.logs.oom import oom_figures, sized_bytes
from explorer.errors import EngineLogError
from explorer.units import GiB, KiB, MiB

#: vllm-project/vllm#17835 (vLLM 0.8.5, V1, tp 2): a rank's error inside the multiproc executor
V1_RANK = (
    "(VllmWorker rank=1 pid=194255) ERROR 05-08 14:46:12 [multiproc_executor.py:435] torch.OutOfMemoryError: CUDA "
    "out of memory. Tried to allocate 270.00 MiB. GPU 1 has a total capacity of 21.98 GiB of which 156.94 MiB is "
    "free. Including non-PyTorch memory, this process has 21.80 GiB memory in use. Of the allocated memory 21.42 GiB "
    "is allocated by PyTorch, and 24.12 MiB is reserved by PyTorch but unallocated. If reserved but unallocated "
    "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.\n"
)
#: vllm-project/vllm#2140 (vLLM 0.2.5, torch 2.1 spells "capacty")
TORCH_21 = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacty of "
    "23.69 GiB of which 3.09 GiB is free. Including non-PyTorch memory, this process has 20.57 GiB memory in use. Of "
    "the allocated memory 20.13 GiB is allocated by PyTorch, and 755.50 KiB is reserved by PyTorch but unallocated.\n"
)
#: vllm-project/vllm#636 (vLLM 0.1.2, torch 2.0): the older parenthesised form, inside a vllm/ traceback
TORCH_20 = (
    '  File "/baichuan/mule/venv/vllm_env/lib/python3.9/site-packages/vllm-0.1.2-py3.9-linux-x86_64.egg/vllm/'
    'model_executor/models/llama.py", line 201, in <listcomp>\n'
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 160.00 MiB (GPU 0; 79.35 GiB total capacity; "
    "78.58 GiB already allocated; 145.19 MiB free; 78.58 GiB reserved in total by PyTorch) If reserved memory is >> "
    "allocated memory try setting max_split_size_mb to avoid fragmentation.\n"
)


def test_sizes_as_torch_prints_them():
    assert sized_bytes("270.00", "MiB") == 270 * MiB
    assert sized_bytes("755.50", "KiB") == round(755.5 * KiB)
    assert sized_bytes("512", "bytes") == 512


def test_the_current_form_gives_every_figure():
    o = oom_figures(V1_RANK)
    assert o["oom_requested_bytes"] == 270 * MiB
    assert o["torch_total_bytes"] == round(21.98 * GiB) and o["oom_free_bytes"] == round(156.94 * MiB)
    assert o["oom_allocated_bytes"] == round(21.42 * GiB)
    assert o["oom_reserved_unallocated_bytes"] == round(24.12 * MiB)


def test_torch_21s_misspelling_is_read():
    o = oom_figures(TORCH_21)
    assert o["torch_total_bytes"] == round(23.69 * GiB) and o["oom_free_bytes"] == round(3.09 * GiB)
    assert o["oom_reserved_unallocated_bytes"] == round(755.5 * KiB)


def test_the_older_form_gives_total_allocated_free_and_reserved():
    o = oom_figures(TORCH_20)
    assert o == {
        "oom_requested_bytes": 160 * MiB,
        "torch_total_bytes": round(79.35 * GiB),
        "oom_allocated_bytes": round(78.58 * GiB),
        "oom_free_bytes": round(145.19 * MiB),
        "oom_reserved_bytes": round(78.58 * GiB),
    }


def test_a_log_that_is_a_traceback_alone_is_read_as_its_engines_refusal():
    log = read_engine_log(TORCH_20)
    assert log.engine == "vllm" and log.refused is True and "CUDA out of memory" in log.refusal
    assert log.observed["oom_requested_bytes"] == 160 * MiB


def test_a_traceback_that_names_no_engine_says_so():
    with pytest.raises(EngineLogError, match="names no engine"):
        read_engine_log(TORCH_21)
    assert oom_figures("no error here\n") == {}
