"""Tests for explorer/hardware/catalogue.py and the shipped data/gpus.csv."""

from __future__ import annotations

import dataclasses

import pytest

from explorer.errors import CatalogueError, UnknownGPUClassError
from explorer.hardware.catalogue import COLUMNS, Catalogue, GPUClass, metal_working_set_bytes
from explorer.sources.shipped import read_catalogue, shipped_catalogue
from explorer.units import GiB, MiB

HEADER = ",".join(COLUMNS)


@pytest.fixture(scope="module")
def cat() -> Catalogue:
    return shipped_catalogue()


# --- the shipped table -------------------------------------------------------------


def test_h100_memory_is_what_the_driver_reports(cat):
    # nvidia-smi says 81,559 MiB; 81,559 × 1,048,576 = 85,520,809,984 bytes, not 80 GiB.
    assert cat.get("h100-80g").memory_bytes == 85_520_809_984


@pytest.mark.parametrize(
    ("name", "mib"),
    [
        ("a100-80g", 81_920),
        ("a100-40g", 40_960),
        ("rtx4090-24g", 24_564),
        ("l4-24g", 23_034),
        ("l40s-48g", 46_068),
        ("h200-141g", 143_771),
        ("b200-180g", 183_359),
        ("a100-80g-mig-1g.10gb", 9_728),
        ("a100-80g-mig-2g.20gb", 19_968),
        ("a100-80g-mig-3g.40gb", 40_192),
        ("a100-80g-mig-4g.40gb", 40_192),
        ("a100-80g-mig-7g.80gb", 80_896),
    ],
)
def test_driver_figures(cat, name, mib):
    assert cat.get(name).memory_bytes == mib * MiB


def test_required_classes_are_present(cat):
    wanted = [
        "h100-80g",
        "h100-pcie-80g",
        "h100-nvl-94g",
        "h200-141g",
        "h20-96g",
        "b200-180g",
        "b300-288g",
        "gb200-186g",
        "a100-80g",
        "a100-40g",
        "a10-24g",
        "a10g-24g",
        "l4-24g",
        "l40-48g",
        "l40s-48g",
        "t4-16g",
        "v100-16g",
        "v100-32g",
        "rtx3060-12g",
        "rtx3090-24g",
        "rtx4060ti-16g",
        "rtx4080-16g",
        "rtx4090-24g",
        "rtx5090-32g",
        "rtx6000ada-48g",
        "rtxa6000-48g",
        "rtxpro6000-96g",
        "mi210-64g",
        "mi250x-64g",
        "mi300x-192g",
        "mi325x-256g",
        "mi355x-288g",
        "m1-max-64g",
        "m1-ultra-128g",
        "m2-ultra-192g",
        "m3-max-128g",
        "m3-ultra-512g",
        "m4-max-128g",
    ]
    assert [n for n in wanted if n not in cat] == []
    for parent in ("a100-40g", "a100-80g", "h100-80g", "h200-141g"):
        assert len(cat.mig_profiles(parent)) >= 5


def test_every_row_is_sane(cat):
    for c in cat:
        assert c.known and c.memory_source, c.name
        assert c.memory_bytes > 0 and c.bandwidth_bytes_per_s > 0 and c.bf16_tflops > 0, c.name
        assert c.vendor in ("nvidia", "amd", "apple"), c.name
        # unified memory: the Apple chips, and NVIDIA's GB10 (DGX Spark), whose CUDA engines see all of it
        assert c.unified == (c.vendor == "apple" or c.name.startswith("gb10-")), c.name
        assert c.metal == (c.vendor == "apple"), c.name
        if c.fp8_tflops is not None:
            assert c.fp8_tflops >= c.bf16_tflops, c.name
        if c.is_mig:
            parent = cat.get(c.mig_parent)
            assert c.name == f"{parent.name}-mig-{c.mig_profile}"
            assert c.memory_bytes <= parent.memory_bytes and c.interconnect_bytes_per_s is None
        elif not c.unified:
            assert c.interconnect_bytes_per_s, c.name


def test_mig_slices_scale_the_parent(cat):
    # 1g.10gb: 1 of 7 compute slices, 1 of 8 memory slices of an A100 80GB.
    s = cat.get("a100-80g-mig-1g.10gb")
    assert s.is_mig and s.mig_parent == "a100-80g" and s.mig_profile == "1g.10gb"
    assert s.bandwidth_bytes_per_s == 2_039_000_000_000 // 8
    assert s.bf16_tflops == pytest.approx(312 / 7, abs=0.05)
    assert not cat.get("a100-80g").is_mig


def test_no_fp8_is_none(cat):
    assert cat.get("a100-80g").fp8_tflops is None
    assert cat.get("h100-80g").fp8_tflops == pytest.approx(1978.9)


def test_load_is_cached():
    assert shipped_catalogue() is shipped_catalogue()


def test_records_are_frozen(cat):
    with pytest.raises(dataclasses.FrozenInstanceError):
        cat.get("h100-80g").memory_bytes = 1  # type: ignore[misc]


# --- resolving labels -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("h100", "h100-80g"),
        ("H100", "h100-80g"),
        ("H100_80G", "h100-80g"),
        ("h100-80gb", "h100-80g"),
        ("NVIDIA H100 80GB", "h100-80g"),
        ("4090", "rtx4090-24g"),
        ("rtx-4090", "rtx4090-24g"),
        ("RTX_4090", "rtx4090-24g"),
        ("a100-80g", "a100-80g"),
        ("mi300x", "mi300x-192g"),
        ("l40s", "l40s-48g"),
        ("a6000", "rtxa6000-48g"),
        ("h100-mig-1g.10gb", "h100-80g-mig-1g.10gb"),
        ("A100_80G_MIG_3g.40gb", "a100-80g-mig-3g.40gb"),
    ],
)
def test_resolve_known(cat, label, name):
    c = cat.resolve(label)
    assert c.name == name and c.known


def test_unknown_with_suffix_is_that_many_gib(cat):
    c = cat.resolve("foo-80g")
    assert c.memory_bytes == 80 * GiB and not c.known
    assert (c.vendor, c.bandwidth_bytes_per_s, c.bf16_tflops, c.fp8_tflops) == ("unknown", 0, 0.0, None)
    assert cat.resolve("foo-80gb").memory_bytes == 80 * GiB


def test_stated_memory_is_exact(cat):
    c = cat.resolve("x:81559MiB")
    assert c.memory_bytes == 81_559 * MiB == 85_520_809_984 and not c.known and c.name == "x:81559MiB"
    assert cat.resolve("h100:81559MiB") is cat.get("h100-80g")  # the catalogue figure itself
    other = cat.resolve("h100:80GiB")  # a known class keeps its figures, memory as stated
    assert other.memory_bytes == 80 * GiB and other.bandwidth_bytes_per_s == 3_350_000_000_000
    assert other.name == "h100-80g:81920MiB"


def test_mig_labels(cat):
    known = cat.resolve("a100-80g-mig-3g.40gb")
    assert known.memory_bytes == 40_192 * MiB and known.known  # exact, not 40 GiB
    unknown = cat.resolve("foo-mig-3g.40gb")
    assert unknown.memory_bytes == 40 * GiB and unknown.is_mig and unknown.mig_parent == "foo"
    assert not unknown.known
    me = cat.resolve("a100-80g-mig-1g.10gb+me")
    assert me.memory_bytes == 9_728 * MiB and me.mig_profile == "1g.10gb+me"


def test_uma_label_is_unified(cat):
    c = cat.resolve("uma-128g")
    assert c.unified and c.memory_bytes == 128 * GiB and not c.known


def test_ambiguous_base_names_both(cat):
    with pytest.raises(UnknownGPUClassError, match=r"ambiguous: a100-40g, a100-80g"):
        cat.resolve("a100")


def test_unknown_without_suffix_lists_near_matches(cat):
    with pytest.raises(UnknownGPUClassError, match=r"'h1000' is not in the catalogue.*near matches: h100-80g"):
        cat.resolve("h1000")
    with pytest.raises(UnknownGPUClassError, match=r"foo-80g means 80 GiB"):
        cat.resolve("blah")


@pytest.mark.parametrize("label", ["", "   ", "x:80", "x:lots", "foo-99999999g", "a:b:1GiB", "x:0MiB"])
def test_bad_labels(cat, label):
    with pytest.raises(UnknownGPUClassError):
        cat.resolve(label)


# --- unified memory -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ram_gib", "usable"),
    [
        (16, 16 * GiB * 2 // 3),  # 10,922.67 MiB, as llama.cpp logs on a 16 GB Mac
        (32, 32 * GiB * 2 // 3),  # 21,845.33 MiB
        (36, 24 * GiB),
        (96, 72 * GiB),  # 73,728 MiB
        (192, 144 * GiB),
    ],
)
def test_metal_working_set(ram_gib, usable):
    assert metal_working_set_bytes(ram_gib * GiB) == usable


def test_usable_memory(cat):
    assert cat.get("m2-ultra-192g").usable_memory_bytes == 144 * GiB
    assert cat.get("h100-80g").usable_memory_bytes == 85_520_809_984


def test_gb10_is_cuda_unified_memory(cat):
    # DGX Spark: 128 GiB of LPDDR5X shared with the CPU, but CUDA engines budget from torch's total
    # (121.63 GiB as vLLM printed it: round(121.63 × 1024**3) = 130,599,218,053 B), not Metal's 3/4.
    gb10 = cat.get("gb10-128g")
    assert gb10.unified and not gb10.metal and gb10.vendor == "nvidia"
    assert gb10.usable_memory_bytes == 128 * GiB
    assert gb10.visible_memory_bytes == 130_599_218_053
    assert gb10.bandwidth_bytes_per_s == 273_000_000_000


def test_rtx5080_is_the_16303_mib_card(cat):
    # nvidia-smi "16303MiB" × 1,048,576 = 17,094,934,528 B
    c = cat.get("rtx5080-16g")
    assert (c.memory_bytes, c.unified, c.architecture) == (17_094_934_528, False, "blackwell-rtx")


# --- parsing tables ---------------------------------------------------------------------


def _row(**kw: str) -> str:
    base = {
        "name": "x-1g",
        "vendor": "nvidia",
        "architecture": "",
        "memory_bytes": "1073741824",
        "memory_source": "test",
        "torch_memory_bytes": "",
        "bandwidth_bytes_per_s": "1",
        "bf16_tflops": "1",
        "fp8_tflops": "",
        "interconnect_bytes_per_s": "",
        "unified": "false",
        "mig_parent": "",
        "mig_profile": "",
        "notes": "",
    }
    base.update(kw)
    return ",".join(base[c] for c in COLUMNS)


def test_small_table_parses():
    cat = Catalogue.from_csv_text(HEADER + "\n" + _row() + "\n")
    assert cat.get("x-1g") == GPUClass(
        name="x-1g", vendor="nvidia", memory_bytes=GiB, memory_source="test", bandwidth_bytes_per_s=1, bf16_tflops=1.0
    )
    assert cat.resolve("x") is cat.get("x-1g") and len(cat) == 1 and cat.names == ("x-1g",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,vendor\nx,y\n", "lacks columns"),
        (HEADER + "\n" + _row(memory_bytes="lots") + "\n", "memory_bytes 'lots' is not a int"),
        (HEADER + "\n" + _row(memory_bytes="0") + "\n", "must be positive"),
        (HEADER + "\n" + _row(torch_memory_bytes="2147483648") + "\n", "torch_memory_bytes 2147483648 must be"),
        (HEADER + "\n" + _row(bf16_tflops="nan") + "\n", "not finite"),
        (HEADER + "\n" + _row(unified="yes") + "\n", "neither true nor false"),
        (HEADER + "\n" + _row(name="X Y") + "\n", "not a lowercase label"),
        (HEADER + "\n" + _row() + "\n" + _row() + "\n", "appears twice"),
        (HEADER + "\n" + _row(mig_parent="nope", mig_profile="1g.5gb") + "\n", "not in the table"),
        (HEADER + "\n" + _row(mig_parent="x-1g") + "\n", "given together"),
    ],
)
def test_bad_tables(text, message):
    with pytest.raises(CatalogueError, match=message):
        Catalogue.from_csv_text(text)


def test_unreadable_table(tmp_path):
    with pytest.raises(CatalogueError, match="cannot read the GPU catalogue"):
        read_catalogue(tmp_path / "missing.csv")
    path = tmp_path / "gpus.csv"
    path.write_text(HEADER + "\n" + _row() + "\n")
    assert read_catalogue(path).get("x-1g").memory_bytes == GiB


def test_torch_visible_totals_sit_just_under_the_drivers():
    cat = shipped_catalogue()
    h100 = cat.get("h100-80g")
    # vLLM 0.19 logs total_memory=79.19GiB on an H100 whose nvidia-smi shows 81,559 MiB (79.65 GiB)
    assert h100.torch_memory_bytes == round(79.19 * GiB) and h100.memory_bytes == 81559 * MiB
    assert h100.visible_memory_bytes == h100.torch_memory_bytes
    # the driver's figure stands in where no log showed the torch total (H200)
    assert cat.get("h200-141g").torch_memory_bytes is None
    assert cat.get("h200-141g").visible_memory_bytes == 143771 * MiB
    for g in cat:
        # a few hundred MiB of driver reserve (448 on a T4); MI300X's ROCm builds differ; a unified-memory chip's
        # torch total is the RAM the OS leaves (GB10: 121.63 of 128 GiB), checked in its own test
        if g.torch_memory_bytes and not g.unified:
            assert 0.97 * g.memory_bytes <= g.torch_memory_bytes <= 1.002 * g.memory_bytes, g.name
    # a label that states the memory drops the torch figure of the class it names
    assert cat.resolve("h100-80g:80GiB").torch_memory_bytes is None


# --- issue 24: unknown classes ----------------------------------------------------------------------------------------


def test_an_unknown_apple_chip_is_a_did_you_mean_not_a_discrete_card(cat):
    """``m3-pro-36g`` is not in the catalogue: it was planned as a discrete 36 GiB card of unknown speed. Now it
    names the catalogue's chips of 36 GiB, ``uma-36g``, and how to insist."""
    with pytest.raises(UnknownGPUClassError) as err:
        cat.resolve("m3-pro-36g")
    text = str(err.value)
    assert "did you mean m3-max-36g, m4-max-36g, uma-36g (a unified-memory host of 36 GiB)?" in text
    assert "state its memory: m3-pro-36g:36GiB" in text
    with pytest.raises(UnknownGPUClassError, match=r"did you mean m4-max-36g, m3-max-36g, uma-36g"):
        cat.resolve("m4-36g")


def test_a_near_miss_of_a_class_of_that_memory_is_a_did_you_mean(cat):
    with pytest.raises(UnknownGPUClassError, match=r"'h100-sxm-80g' is not in the catalogue; did you mean h100-80g"):
        cat.resolve("h100-sxm-80g")


def test_an_unknown_label_near_nothing_is_still_inferred_and_says_what_it_assumed(cat):
    c = cat.resolve("foo-80g")
    assert not c.known and c.assumed == (
        "foo-80g is not in the catalogue: planned as a discrete card of 80.0 GiB (inferred from the label "
        "'foo-80g'), of unknown memory bandwidth and TFLOPs (no speed estimate)"
    )
    assert cat.resolve("h100-80g").assumed is None
    insisted = cat.resolve("m3-pro-36g:36GiB")  # the user insists: planned, and it says so
    assert (
        insisted.memory_bytes == 36 * GiB
        and not insisted.unified
        and insisted.assumed.startswith(
            "m3-pro-36g:36864MiB is not in the catalogue: planned as a discrete card of 36.0 GiB"
        )
    )
