"""Every printed launch line of a sweep, checked by the engines' own argument tables (issue 24 §1).

The sweep: the snapshot's models × clusters (one card, one node, two nodes on a fabric, two without one, a
node of two card classes) × settings (the defaults; a longer context with an fp8 KV cache, four sequences and
every knob set), each engine's options, automatic and pinned. Every line a user would copy (the replicas'
launch lines, one per node for a launch across nodes; a pinned launch's, each replica's) is read by
:func:`support.command_check.parse_line` against the pinned release's table (``tests/data/engine_args/``):
the options exist, the values parse and lie in range, nothing is combined that the engine refuses. Then the
line must carry what the plan assumed: tp, pp, dp, ep, the context, the KV type, the memory share, the batch
sizes, the devices (``CUDA_VISIBLE_DEVICES``, as many as the launch's cards on that node) and a port for each
server, one line for each node of a launch across nodes with its rank and the head's address, and a model
that is a published repository or a visible ``<placeholder>``.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache

import pytest
from support.command_check import TABLES, Parsed, model_of, parse_line, table

from explorer.engines.options import Option
from explorer.engines.request import PlanRequest
from explorer.engines.serve_command import DTYPE_FLAGS
from explorer.errors import ExplorerError
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.plan.pinning import check_pinned, pinned_launch
from explorer.plan.planner import option_request, plan
from explorer.sources.known_models import known_models
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.units import GiB

CLUSTERS = {
    "1x1xh100-80g": "1x1xh100-80g",
    "1x4xl40s-48g": "1x4xl40s-48g",
    "2x8xh100-80g@ib0": "2x8xh100-80g@ib0",
    "2x2xt4-16g": "2x2xt4-16g",  # two nodes, no fabric
    "4x1xrtx4090-24g@eth0": "4x1xrtx4090-24g@eth0",  # one card a node on a fabric: llama.cpp over RPC, its copies
}
#: a node whose card 0 is an RTX 4090 and card 1 an L40S (issue 24's mixed node)
MIXED = {"nodes": [{"name": "mix", "gpus": [{"class": "rtx4090-24g", "count": 1}, {"class": "l40s-48g", "count": 1}]}]}

SETTINGS = {
    "defaults": PlanRequest(),
    "knobs": PlanRequest(
        context_tokens=32768,
        concurrency=4,
        kv_dtype="fp8",
        gpu_memory_utilization=0.85,
        mem_fraction_static=0.8,
        max_num_seqs=64,
        max_num_batched_tokens=4096,
        chunked_prefill_size=4096,
        cuda_graph_max_bs=32,
        enforce_eager=True,
    ),
    "host": PlanRequest(
        context_tokens=8192,
        kv_dtype="q8_0",
        flash_attn="on",
        mmap=False,
        hierarchical_cache=True,
        hicache_ratio=1.5,
        engines=("llamacpp", "sglang"),
    ),
    "parallel": PlanRequest(tensor_parallel_size=2, data_parallel_size=2, engines=("vllm", "sglang")),
    # many users at a long context: the fp8 KV cache the planner adds, and the queueing candidates
    "many users": PlanRequest(context_tokens=32768, concurrency=64),
}
#: options checked a plan: the first few and the best of each engine
TOP = 6
SERVERS = ("vllm", "sglang", "llamacpp")


@cache
def _models():
    return known_models(use_cache=False).models


def _cluster(name: str):
    return cluster_from_dict(MIXED, shipped_catalogue()) if name == "mixed" else parse_cluster(CLUSTERS[name])


def _ports_and_ranks(lines: list[Parsed], option: Option) -> list[str]:
    """One port per server on a node; a launch across nodes: ranks 0..N-1 once each, the head a placeholder."""
    problems = []
    seen: Counter[tuple[str, str]] = Counter()
    for p in lines:
        if p.engine in SERVERS and _serves_http(p):
            port = p.value("--port")
            if port is None:
                problems.append(f"{p.engine}: no --port")
            seen[(p.where, str(port))] += 1
    problems += [f"port {port} twice on {where or 'one node'}" for (where, port), n in seen.items() if n > 1]
    return problems + _meeting_ports(lines)


def _meeting_ports(lines: list[Parsed]) -> list[str]:
    """Two launches across nodes headed on one node meet at different ports there: vLLM's --master-port (29501
    when not given) and --data-parallel-rpc-port, SGLang's --dist-init-addr port."""
    heads: Counter[tuple[str, str, str]] = Counter()
    for p in lines:
        if not _serves_http(p):
            continue
        if p.engine == "vllm" and p.value("--nnodes") not in (None, "1"):
            heads[(p.where, "--master-port", str(p.value("--master-port") or 29501))] += 1
        if p.engine == "vllm" and p.value("--data-parallel-address") is not None:
            heads[(p.where, "--data-parallel-rpc-port", str(p.value("--data-parallel-rpc-port")))] += 1
        if p.engine == "sglang" and p.value("--dist-init-addr") is not None:
            heads[(p.where, "--dist-init-addr", str(p.value("--dist-init-addr")).rsplit(":", 1)[1])] += 1
    for p in lines:
        if p.engine == "rpc-server":
            heads[(_host(p.where), "rpc-server -p", str(p.value("-p")))] += 1
    problems = [f"{flag} {port} twice on {where}" for (where, flag, port), n in heads.items() if n > 1]
    return problems + _rpc_endpoints(lines)


def _host(where: str) -> str:
    """A line's node without the brackets of a placeholder (``<gpu-b>`` → ``gpu-b``)."""
    return where[1:-1] if where.startswith("<") and where.endswith(">") else where


def _rpc_endpoints(lines: list[Parsed]) -> list[str]:
    """Every ``--rpc`` endpoint of a main server is an ``rpc-server`` line of the launch on that node and port,
    and every rpc-server line is some server's endpoint."""
    servers = {(_host(p.where), str(p.value("-p"))) for p in lines if p.engine == "rpc-server"}
    wanted = set()
    for p in lines:
        if p.engine == "llamacpp" and p.value("--rpc"):
            for endpoint in str(p.value("--rpc")).split(","):
                host, _, port = endpoint.rpartition(":")
                wanted.add((_host(host), port))
    return [f"--rpc {h}:{port}: no rpc-server there" for h, port in sorted(wanted - servers)] + [
        f"rpc-server on {h} -p {port}: no server uses it" for h, port in sorted(servers - wanted)
    ]


def _serves_http(p: Parsed) -> bool:
    """A line that starts an API server (not a vLLM --headless worker nor an SGLang rank above 0)."""
    if p.engine == "vllm":
        return p.value("--headless") is None
    if p.engine == "sglang":
        return str(p.value("--node-rank") or "0") == "0"
    return p.engine == "llamacpp"


def settings_problems(p: Parsed, option: Option, request: PlanRequest, dp_factor: int) -> list[str]:
    """What the plan assumed and the server line lacks (see the module docstring)."""
    lay = option.layout
    want: dict[str, object] = {}
    if p.engine == "vllm":
        want = {
            "--tensor-parallel-size": lay.tp if lay.tp > 1 else None,
            "--pipeline-parallel-size": lay.pp if lay.pp > 1 else None,
            "--max-model-len": request.context_tokens,
            "--gpu-memory-utilization": request.gpu_memory_utilization,
            "--max-num-seqs": request.max_num_seqs or "any",
            "--max-num-batched-tokens": request.max_num_batched_tokens or "any",
        }
        if lay.dp * dp_factor > 1:
            want["--data-parallel-size"] = lay.dp * dp_factor
        if lay.ep > 1:
            want["--enable-expert-parallel"] = True
        if request.enforce_eager:
            want["--enforce-eager"] = True
        if lay.nodes > 1 and p.value("--data-parallel-size-local") is not None:  # dp ranks started node by node
            want |= {"--data-parallel-size-local": lay.dp // lay.nodes, "--data-parallel-address": "any"}
        elif lay.nodes > 1:
            want |= {"--nnodes": lay.nodes, "--node-rank": "any", "--master-addr": "any"}
    elif p.engine == "sglang":
        want = {
            "--tp-size": lay.tp if lay.tp > 1 else None,
            "--pp-size": lay.pp if lay.pp > 1 else None,
            "--context-length": request.context_tokens,
            "--mem-fraction-static": request.mem_fraction_static or "any",
            "--chunked-prefill-size": request.chunked_prefill_size or "any",
            "--cuda-graph-max-bs": request.cuda_graph_max_bs or "any",
        }
        if lay.dp * dp_factor > 1:
            want["--dp-size"] = lay.dp * dp_factor
        if lay.ep > 1:
            want["--ep-size"] = lay.ep
        if lay.nodes > 1:
            want |= {"--nnodes": lay.nodes, "--node-rank": "any", "--dist-init-addr": "any"}
    elif p.engine == "llamacpp":
        want = {
            "-c": request.context_tokens * request.concurrency,
            "-b": request.batch_tokens,
            "-ub": request.ubatch_tokens,
            "-np": request.concurrency if request.concurrency > 1 else None,
            "-ngl": 0 if lay.cpu else "any",  # the default is auto at 0c1e57098: a CPU launch must say 0
        }
    if request.kv_dtype not in ("auto", option.artifact.quant) and p.engine in ("vllm", "sglang"):
        want["--kv-cache-dtype"] = "any"
    if option.dtype and p.engine in ("vllm", "sglang"):  # a float32 checkpoint loaded at 16 bits (load_dtype)
        want["--dtype"] = DTYPE_FLAGS[option.dtype]
    if request.kv_dtype not in ("auto",) and p.engine == "llamacpp":
        want["-ctk"] = want["-ctv"] = "any"
    problems = []
    for name, value in want.items():
        got = p.value(name)
        if value is None:
            if got is not None and str(got) != "1":
                problems.append(f"{name} {got}: the plan has none")
        elif got is None:
            problems.append(f"{name}: missing (the plan assumed {value})")
        elif value != "any" and str(got) != str(value) and _number(got) != _number(value):
            problems.append(f"{name} {got}: the plan assumed {value}")
    return problems


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def line_problems(lines: list[str], option: Option, request: PlanRequest, refs: set[str]) -> list[str]:
    """Every problem of one option's launch lines (see the module docstring)."""
    parsed = [parse_line(line) for line in lines]
    problems = [f"{p.engine or '?'}: {x}" for p in parsed for x in p.problems]
    gpu = not (option.layout.cpu or option.layout.unified)
    for p in parsed:
        if p.engine in SERVERS:
            ref = model_of(p) or ""
            if not (ref.startswith("<") and ref.endswith(">")) and ref not in refs:
                problems.append(f"{p.engine}: model {ref!r} is neither a published repository nor a placeholder")
            dp_factor = 1
            if p.engine in ("vllm", "sglang") and option.layout.dp == 1:
                dp_factor = int(p.value("--data-parallel-size" if p.engine == "vllm" else "--dp-size") or 1)
            problems += [f"{p.engine}: {x}" for x in settings_problems(p, option, request, dp_factor)]
        if gpu and p.engine in (*SERVERS, "rpc-server"):
            devices = p.env.get("CUDA_VISIBLE_DEVICES")
            if devices is None:
                problems.append(f"{p.engine}: no CUDA_VISIBLE_DEVICES")
    problems += _ports_and_ranks(parsed, option)
    if gpu and option.layout.nodes > 1 and not option.layout.rpc:
        problems += _copies_across_nodes(parsed, option.layout.nodes)
    return problems


def _rank(p: Parsed) -> str:
    """A line's node rank: ``--node-rank``, or for vLLM's dp ranks over nodes its first rank over its local ones."""
    local = p.value("--data-parallel-size-local")
    if local is not None:
        return str(int(p.value("--data-parallel-start-rank") or 0) // int(local))
    return str(p.value("--node-rank"))


def _copies_across_nodes(parsed: list[Parsed], nodes: int) -> list[str]:
    """A copy across ``nodes`` nodes is ``nodes`` lines, ranks 0..nodes-1 in order, on distinct nodes, each naming
    the head (the rank-0 line's node) as a placeholder address."""
    problems = []
    if len(parsed) % nodes:
        return [f"{len(parsed)} lines are not copies of {nodes} nodes"]
    for first in range(0, len(parsed), nodes):
        copy = parsed[first : first + nodes]
        ranks = [_rank(p) for p in copy]
        if ranks != [str(r) for r in range(nodes)] or len({p.where for p in copy}) != nodes:
            problems.append(f"ranks {ranks} on {[p.where for p in copy]}: want 0..{nodes - 1} on distinct nodes")
        # a head on a node the user picks (``<node1>``) is named by the engine's own placeholder
        head = "<head-node>" if copy[0].where.startswith("<") else f"<{copy[0].where}>"
        for p in copy:
            named = p.value("--master-addr") or p.value("--dist-init-addr") or p.value("--data-parallel-address")
            address = str(named or "").rsplit(":", 1)[0]
            if address != head:
                problems.append(f"rank {_rank(p)} names the head {address!r}, not {head!r}")
    return problems


def _refs(model, option: Option) -> set[str]:
    return {model.ref, *(a.repo for a in model.artifacts if a.repo), option.artifact.repo or model.ref}


def _sweep_automatic():
    for cluster_name in [*CLUSTERS, "mixed"]:
        cluster = _cluster(cluster_name)
        for setting, request in SETTINGS.items():
            for model in _models():
                try:
                    result = plan(
                        model.shape, cluster, request, artifacts=model.artifacts, model_ref=model.ref,
                        suggest=False, speed=False,
                    )  # fmt: skip
                except ExplorerError:
                    continue
                chosen = list(result.options[:TOP]) + [
                    o for o in result.best_per_engine().values() if o not in result.options[:TOP]
                ]
                for option in chosen:
                    lines = list(result.replica_launch(option).lines)
                    asked = option_request(request, option)  # with the KV cache type the planner chose for it
                    yield f"{model.ref} on {cluster_name} ({setting}): {option.label}", lines, option, asked, model


#: pinned cards a cluster: (cards, replicas, the user's tp)
PINS = {
    "1x4xl40s-48g": [("l40s-48g#0:1", 1, None), ("l40s-48g#0:2,l40s-48g#0:3", 2, None), ("0,1,2,3", 1, 2)],
    "2x8xh100-80g@ib0": [
        ("h100-80g@ib0#0:0,h100-80g@ib0#0:1,h100-80g@ib0#1:0,h100-80g@ib0#1:1", 1, None),
        # two copies each over both nodes (llama.cpp: two RPC servers on node 1; vLLM and SGLang refuse it)
        ("h100-80g@ib0#0:0,h100-80g@ib0#1:0,h100-80g@ib0#0:1,h100-80g@ib0#1:1", 2, None),
    ],
    "mixed": [("mix:0,mix:1", 1, None)],
}


def _sweep_pinned():
    for cluster_name, pins in PINS.items():
        cluster = _cluster(cluster_name)
        for model in _models()[::4]:
            for engine in SERVERS:
                for gpus, replicas, tp in pins:
                    request = PlanRequest(tensor_parallel_size=tp)
                    try:
                        result = check_pinned(
                            model.shape, cluster, gpus.split(","), engine=engine, request=request,
                            artifacts=model.artifacts, model_ref=model.ref, replicas=replicas,
                        )  # fmt: skip
                    except ExplorerError:
                        continue
                    lines = list(pinned_launch(result))
                    yield f"{model.ref} pinned {gpus} ×{replicas} ({engine})", lines, result.option, request, model


def _sweep():
    yield from _sweep_automatic()
    yield from _sweep_pinned()


def test_every_command_of_the_sweep_is_one_the_engine_takes_with_every_setting_the_plan_assumed():
    counts: Counter[str] = Counter()
    failures: list[str] = []
    for what, lines, option, request, model in _sweep():
        for line in lines:
            counts[parse_line(line).engine] += 1
        problems = line_problems(lines, option, request, _refs(model, option))
        if problems:
            failures.append(f"{what}: {'; '.join(dict.fromkeys(problems))}\n    " + "\n    ".join(lines))
    print(dict(counts))
    assert sum(counts.values()) >= 2000, counts
    assert not failures, f"{len(failures)} launches wrong, e.g.\n" + "\n".join(failures[:15])


# --- the tables and the checker themselves -------------------------------------------------------------------


def test_the_tables_say_where_they_came_from_and_hold_the_engines_facts():
    """Facts read off each engine's source at the pinned release (tests/support/engine_args.py wrote them)."""
    for engine, release in (("vllm", "vllm 0.26.0"), ("sglang", "sglang 0.5.10.post1"), ("llamacpp", "0c1e57098")):
        assert release in json.loads((TABLES / f"{engine}.json").read_text())["source"]
    assert table("vllm")["-tp"]["names"][0] == "--tensor-parallel-size"
    # pydantic Field(default=0.92, gt=0, le=1) in vllm/config/cache.py
    assert {k: table("vllm")["--gpu-memory-utilization"][k] for k in ("type", "min", "min_exclusive", "max")} == {
        "type": "float", "min": 0, "min_exclusive": True, "max": 1,
    }  # fmt: skip
    assert "--no-enforce-eager" in table("vllm")["--enforce-eager"]["names"]  # a BooleanOptionalAction
    assert "--swap-space" not in table("vllm")  # gone from vLLM's V1 engine
    assert table("sglang")["--hicache-size"]["type"] == "int"
    assert table("sglang")["--tp-size"]["names"] == ["--tensor-parallel-size", "--tp-size"]
    assert "--no-mmap" not in table("llamacpp")
    assert table("llamacpp")["--load-mode"]["choices"] == ["auto", "none", "mmap", "mlock", "mmap+mlock", "dio"]
    assert table("llamacpp")["-ctk"]["choices"] == [
        "f32",
        "f16",
        "bf16",
        "q8_0",
        "q4_0",
        "q4_1",
        "iq4_nl",
        "q5_0",
        "q5_1",
    ]
    assert table("rpc-server")["-p"] == {"names": ["-p", "--port"], "type": "int", "min": 1, "max": 65535}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("llama-server -m a.gguf -c 4096 --no-mmap", "--no-mmap: no such option at the pinned release"),
        ("llama-server -m a.gguf -c lots", "-c lots: not an int"),
        ("llama-server -m a.gguf -fa maybe", "-fa maybe: not one of"),
        ("llama-server -m a.gguf -hf o/r", "-m with -hf: a model file and a Hub repository at once"),
        ("vllm serve o/r --gpu-memory-utilization 1.2", "above the most allowed (1)"),
        ("vllm serve o/r --gpu-memory-utilization 0", "below the least allowed (0)"),
        ("vllm serve o/r --kv-cache-dtype q8_0", "not one of"),
        ("vllm serve o/r --swap-space 8", "--swap-space: no such option at the pinned release"),
        ("vllm serve o/r --nnodes 2 --distributed-executor-backend ray", "nnodes > 1 needs the mp backend"),
        ("vllm serve o/r -tp 2 --tensor-parallel-size 2", "--tensor-parallel-size: given twice"),
        ("python -m sglang.launch_server --model-path o/r --hicache-size 8.5", "not an int"),
        ("python -m sglang.launch_server --model-path o/r --enable-dp-attention=1", "a flag takes no value"),
        ("rpc-server -p 70000", "above the most allowed (65535)"),
        ("ollama run o/r", "unknown program"),
    ],
)
def test_the_checker_refuses_what_the_engine_would(line, problem):
    assert any(problem in p for p in parse_line(line).problems), parse_line(line).problems


def test_the_checker_reads_a_placed_line():
    p = parse_line("h100-80g@ib0#1: CUDA_VISIBLE_DEVICES=0,1 vllm serve <o/r at AWQ (no published checkpoint)> "
                   "--tensor-parallel-size=2 --headless")  # fmt: skip
    assert (p.where, p.env, p.engine, p.problems) == ("h100-80g@ib0#1", {"CUDA_VISIBLE_DEVICES": "0,1"}, "vllm", [])
    assert model_of(p) == "<o/r at AWQ (no published checkpoint)>" and p.value("-tp") == "2"


def test_a_swap_space_the_plan_charges_is_in_the_command_as_a_flag_vllm_takes():
    """vLLM 0.26.0 has no --swap-space (the table above; vllm-project/vllm#36216 removed it for 0.18.0): a swap
    space asked there is refused with the release named, never charged; at 0.17.1, the last release with the
    flag, the command prints what the plan charges (8 GiB × 1 GPU of host RAM)."""
    shape = next(m.shape for m in _models() if m.ref == "Qwen/Qwen3-8B")
    cluster = parse_cluster("1x1xh100-80g")
    current = plan(shape, cluster, PlanRequest(engines=("vllm",), swap_space_gib=8), suggest=False, speed=False)
    assert not current.options
    reasons = {x.reason for x in current.rejected if x.rule == "swap-space"}
    assert reasons and all(
        "vLLM 0.26 (current) has no --swap-space" in r and "--vllm-version 0.17.1" in r for r in reasons
    )
    older = plan(shape, cluster, PlanRequest(engines=("vllm",), swap_space_gib=8, vllm_version="0.17.1"),
                 suggest=False, speed=False)  # fmt: skip
    best = older.options[0].evaluation
    words = best.command.split()  # (the checker's table is 0.26.0's, so the words are read here)
    assert words[words.index("--swap-space") + 1] == "8" and words.count("--swap-space") == 1
    assert best.host is not None and best.host.overhead == 8 * GiB  # one GPU × 8 GiB
    # no swap space asked: none charged, none printed (V1 sets none aside)
    plain = plan(shape, cluster, PlanRequest(engines=("vllm",)), suggest=False, speed=False).options[0].evaluation
    assert "--swap-space" not in plain.command and plain.host is None


LL, HT = "deepep_low_latency", "deepep_high_throughput"


@pytest.mark.parametrize(
    ("engine", "backend", "request_fields", "flags"),
    [
        ("vllm", LL, {"data_parallel_size": 8}, {"--all2all-backend": LL, "--data-parallel-size": "8"}),
        ("vllm", HT, {}, {"--all2all-backend": HT}),
        (
            "sglang",
            LL,
            {"dp_attention": True},
            {"--moe-a2a-backend": "deepep", "--deepep-mode": "low_latency", "--ep-size": "8", "--dp-size": "8"},
        ),
        ("sglang", HT, {}, {"--moe-a2a-backend": "deepep", "--deepep-mode": "normal", "--ep-size": "8"}),
        ("sglang", "deepep_auto", {"dp_attention": True}, {"--moe-a2a-backend": "deepep", "--deepep-mode": "auto"}),
    ],
)
def test_an_all_to_all_backend_the_plan_charges_is_in_the_command_as_flags_the_engine_takes(
    engine, backend, request_fields, flags
):
    """DeepSeek-V3 on 8 × H200 with DeepEP (explorer.engines.all2all): the first option's line names the backend as
    the pinned release spells it (vLLM --all2all-backend; SGLang --moe-a2a-backend deepep --deepep-mode)."""
    shape = next(m.shape for m in _models() if m.ref == "deepseek-ai/DeepSeek-V3")
    request = PlanRequest(engines=(engine,), all2all_backend=backend, **request_fields)
    result = plan(shape, parse_cluster("1x8xh200-141g"), request, suggest=False, speed=False)
    parsed = parse_line(result.options[0].evaluation.command)
    assert not parsed.problems
    assert {flag: parsed.value(flag) for flag in flags} == flags
