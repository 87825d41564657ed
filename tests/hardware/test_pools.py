"""GPU pools: alike nodes counted together, by their cards and by their host RAM."""

from __future__ import annotations

from explorer.hardware.pools import gpu_pools
from explorer.sources.shipped import parse_cluster

GiB = 2**30


def _pool(spec):
    (pool,) = gpu_pools(parse_cluster(spec))
    return pool


def test_alike_nodes_are_one_kind_each():
    """Three 8-card nodes with 512 GiB, one with 2 TiB, two with 4 cards: three kinds, counted 3, 1 and 2."""
    pool = _pool("3x8xh100-80g@ib0,ram=512g + 1x8xh100-80g@ib0,ram=2t + 2x4xh100-80g@ib0,ram=512g")
    assert [(n.group("h100-80g").count, n.host_ram_bytes // GiB, many) for n, many in pool.kinds] == [
        (8, 512, 3),
        (8, 2048, 1),
        (4, 512, 2),
    ]
    assert [(g.count, many) for g, many in pool.alike] == [(8, 4), (4, 2)]
    assert (pool.width(), pool.hosts(8), pool.hosts(4)) == (8, 4, 6)


def test_kinds_holding_a_width_and_a_host_test():
    pool = _pool("3x8xh100-80g@ib0,ram=512g + 1x8xh100-80g@ib0,ram=2t + 2x4xh100-80g@ib0,ram=512g")
    roomy = pool.kinds_holding(8, lambda n: n.host_ram_bytes >= 1024 * GiB)
    assert [(n.host_ram_bytes // GiB, many) for n, many in roomy] == [(2048, 1)]
    assert sum(many for _, many in pool.kinds_holding(4, lambda n: True)) == 6


def test_ten_thousand_alike_nodes_are_one_kind():
    pool = _pool("10000x8xh100-80g@ib0")
    assert len(pool.kinds) == 1 and pool.kinds[0][1] == 10_000 and pool.hosts(8) == 10_000


def test_a_gb10_node_is_a_pool_and_a_mac_is_not():
    # GB10's engines are CUDA ones (vLLM, SGLang): it pools like a card; an Apple chip is left to llama.cpp's Metal walk
    assert [p.gpu.name for p in gpu_pools(parse_cluster("1xgb10-128g"))] == ["gb10-128g"]
    assert gpu_pools(parse_cluster("1xm4-max-128g")) == []
