"""explorer.engines.request: a request's numbers are checked where it is made.

The CLI refuses bad numbers first (``explorer/cli/args.py``); the request
refuses them again for every other caller (the app, the widgets, a script), so
no option is ever ranked on a negative, NaN or infinite figure.
"""

from __future__ import annotations

import math

import pytest
from support.corpus import shape_of

from explorer.engines.request import PlanRequest
from explorer.errors import PlanError
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("context_tokens", -1), ("context_tokens", 0), ("context_tokens", 2**40), ("context_tokens", 4096.0),
        ("concurrency", 0), ("batch_tokens", 0), ("ubatch_tokens", -512), ("n_gpu_layers", -2),
        ("gpu_memory_utilization", math.nan), ("gpu_memory_utilization", 0.0), ("gpu_memory_utilization", 1.5),
        ("mem_fraction_static", 2.0), ("mem_fraction_static", math.nan), ("mem_fraction_static", -0.1),
        ("host_fraction", math.inf), ("tensor_split", (1e308, math.inf)), ("tensor_split", (0.0, 0.0)),
        ("tensor_split", (math.nan, 1.0)), ("tensor_split", (-1.0, 2.0)), ("tensor_split", ()),
        ("max_num_seqs", -4),
    ],
)  # fmt: skip
def test_a_request_out_of_range_is_a_plan_error_naming_it(field, value):
    with pytest.raises(PlanError, match=field):
        PlanRequest(**{field: value})


def test_a_request_in_range_is_kept_as_given():
    r = PlanRequest(context_tokens=131_072, concurrency=8, mem_fraction_static=0.85, tensor_split=(3.0, 1.0))
    assert (r.context_tokens, r.concurrency, r.mem_fraction_static, r.tensor_split) == (131_072, 8, 0.85, (3.0, 1.0))


def test_mem_fraction_static_2_no_longer_ranks_a_negative_card():
    # was: the best option held a KV pool of 0.6 GiB of "usable" 79.6 GiB on an 80 GB card at 2 × its memory
    with pytest.raises(PlanError, match="mem_fraction_static is 2"):
        plan(shape_of("Qwen__Qwen3-8B"), parse_cluster("1x1xh100-80g"), PlanRequest(mem_fraction_static=2.0))
