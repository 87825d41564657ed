"""The weight support table: parsed and checked, attached to each catalogue class by its architecture."""

from __future__ import annotations

import pytest

from explorer.errors import CatalogueError
from explorer.hardware.catalogue import Catalogue
from explorer.hardware.weight_support import parse_weight_support, rows_for
from explorer.sources.shipped import shipped_catalogue

TABLE = "engine,format,architecture,support,source\nvllm,fp8,ampere,weight-only,x\nsglang,fp8-block,ampere,no,y\n"


def test_rows_are_read_and_grouped_by_architecture():
    rows = parse_weight_support(TABLE)
    assert rows == (("vllm", "fp8", "ampere", "weight-only"), ("sglang", "fp8-block", "ampere", "no"))
    assert rows_for(rows, "ampere") == (("vllm", "fp8", "weight-only"), ("sglang", "fp8-block", "no"))
    assert rows_for(rows, "hopper") == ()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("vllm,fp8,pascal,no,x", "architecture 'pascal'"),
        ("vllm,fp6,ampere,no,x", "format 'fp6'"),
        ("vllm,fp8,ampere,maybe,x", "support 'maybe'"),
        ("vllm,fp8,ampere,weight-only,x", "vllm fp8 on ampere is given twice"),
        (",fp8,hopper,no,x", "no engine"),
    ],
)
def test_a_bad_row_is_a_typed_error_naming_it(line, message):
    with pytest.raises(CatalogueError, match=message):
        parse_weight_support(TABLE + line + "\n")


def test_a_table_without_its_columns_is_refused():
    with pytest.raises(CatalogueError, match="lacks columns: support"):
        parse_weight_support("engine,format,architecture,source\n")


def test_the_catalogue_hands_each_class_its_architectures_rows():
    header = "name,vendor,architecture,memory_bytes,memory_source,torch_memory_bytes,bandwidth_bytes_per_s,"
    header += "bf16_tflops,fp8_tflops,interconnect_bytes_per_s,unified,mig_parent,mig_profile,notes\n"
    row = "x-1g,nvidia,ampere,1073741824,test,,1,1,,,false,,,\n"
    cat = Catalogue.from_csv_text(header + row, weight_support=TABLE)
    gpu = cat.get("x-1g")
    assert gpu.architecture == "ampere" and gpu.runs("vllm", "fp8") == "weight-only"
    assert gpu.runs("sglang", "fp8-block") == "no" and gpu.runs("vllm", "nvfp4") is None
    with pytest.raises(CatalogueError, match="architecture 'kepler'"):
        Catalogue.from_csv_text(header + row.replace("ampere", "kepler"))


def test_the_shipped_table_says_what_the_engines_docs_say():
    cat = shipped_catalogue()
    a100, h100, b200, l40s = (cat.get(n) for n in ("a100-80g", "h100-80g", "b200-180g", "l40s-48g"))
    # SGLang's docs: DeepSeek on A100 needs a BF16 conversion; vLLM's fp8.py runs block fp8 through Marlin
    # ("block-wise quantization -> group-wise quantization" in marlin_utils_fp8.py)
    assert a100.runs("sglang", "fp8-block") == "no" and a100.runs("vllm", "fp8-block") == "weight-only"
    assert a100.runs("vllm", "fp8") == "weight-only"  # FP8 Marlin, sm80
    assert h100.runs("sglang", "fp8-block") == "native" and l40s.runs("vllm", "fp8") == "native"
    assert h100.runs("vllm", "nvfp4") == "weight-only" and b200.runs("vllm", "nvfp4") == "native"
    assert h100.runs("sglang", "nvfp4") == "no" and b200.runs("sglang", "nvfp4") == "native"
    assert cat.get("a100-80g-mig-1g.10gb").architecture == "ampere"
    every = [c for c in (cat.get(n) for n in cat.names) if c is not None]
    assert all(c.architecture for c in every)  # every shipped class names its architecture
