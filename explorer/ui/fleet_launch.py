"""How to start each instance of a placement: its node, its GPUs and the engine's launch lines.

A placement pins each instance to cards by index in the fleet
(:func:`explorer.fleet.footprints.fleet_cards`); :attr:`FleetCards.places`
says which node and which GPU of that node each card is. Each instance gets the
planner's treatment (:mod:`explorer.plan.launch_lines`): ``CUDA_VISIBLE_DEVICES``
on each node in the order the split assumes (``CUDA_DEVICE_ORDER=PCI_BUS_ID`` on
a node of several classes), one port a server on a node (8000, 8001, ...), a line a node for
an instance across nodes, each further such launch meeting at ports of its own,
and every setting the placement's footprint assumed:

- vLLM: ``--gpu-memory-utilization`` is the largest share of a card the
  instance is charged, rounded *up* to the hundredth (vLLM budgets that share
  of every card it uses), at most 1 (a tight instance); several cards are ``--tensor-parallel-size``; the
  scheduler's batch sizes are vLLM's defaults for the card, which the footprint
  was measured at (:func:`explorer.engines.vllm_budget.scheduler_defaults`);
  across nodes, vLLM's multiprocessing backend: ``--nnodes``, ``--node-rank``,
  the head's address and ``--master-port``, ``--headless`` above rank 0.
- llama.cpp: every layer on the GPUs (``-ngl 999``), the batch sizes the
  footprint was measured at (``-b``, ``-ub``), and several cards are a
  ``--tensor-split`` in the proportions the placement split the weights and KV;
  across nodes, the other nodes' cards are ``rpc-server``s (one a card), and the
  split follows llama.cpp's device order: the RPC servers first, in ``--rpc``
  order, then the local GPUs (``src/llama.cpp``: "add RPC servers at the front
  of the list").

Text only: no marimo.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from explorer.engines.common import Evaluation, NodeCommand, PlanRequest, across_nodes
from explorer.engines.llamacpp.seats import RPC_FIRST_PORT
from explorer.engines.vllm import meeting_ports, rank_flags
from explorer.engines.vllm_budget import scheduler_defaults
from explorer.engines.vllm_release import vllm_release
from explorer.fleet.footprints import FleetCards
from explorer.fleet.result import Instance, Placement
from explorer.plan.launch_lines import FIRST_PORT, launch_lines, on_devices

__all__ = ["LAUNCH_COLUMNS", "instance_lines", "launch_rows"]

#: the launch table's columns
LAUNCH_COLUMNS = ("model", "replica", "where", "command")


def _model_arg(engine: str, model_id: str) -> str:
    if engine == "llamacpp":
        local = model_id.endswith(".gguf") or model_id.startswith(("/", ".", "~"))
        return f"-m {model_id}" if local else f"-hf {model_id}"
    return model_id


def _nodes(inst: Instance, offer: FleetCards) -> list[tuple[str, list[int]]]:
    """Each node the instance runs on, in the order of its cards, with its GPU indices there; none on a
    unified-memory pool."""
    if not inst.cards or inst.cards[0] < 0 or not offer.places:
        return []
    by_node: dict[str, list[int]] = {}
    for card in inst.cards:
        node, index = offer.places[card]
        by_node.setdefault(node, []).append(index)
    return list(by_node.items())


def _where(inst: Instance, offer: FleetCards) -> str:
    """Where it runs, in words."""
    nodes = _nodes(inst, offer)
    if not nodes:
        return "the unified-memory pool"
    return " + ".join(f"{node} GPUs {','.join(map(str, gpus))}" for node, gpus in nodes)


def _vllm(inst: Instance, model_id: str, offer: FleetCards, nodes: int) -> Evaluation:
    """vLLM's command for the instance: the memory share it was charged, its tp, the batch sizes its footprint
    assumed, a line a node across nodes."""
    parts = [f"vllm serve {model_id}"]
    if len(inst.cards) > 1:
        parts.append(f"--tensor-parallel-size {len(inst.cards)}")
    parts.append(f"--max-model-len {inst.context_tokens}")
    if nodes:
        share = max(b / (offer.cards[c].total_bytes or offer.cards[c].usable_bytes)
                    for b, c in zip(inst.split_bytes, inst.cards, strict=True))  # fmt: skip
        # a tight instance (charged past a card) asks for the whole card: the most vLLM takes; the app says it is tight
        parts.append(f"--gpu-memory-utilization {min(math.ceil(share * 100) / 100, 1.0):.2f}")
    if offer.gpu is not None:
        request = PlanRequest(context_tokens=max(1, inst.context_tokens))  # a weights-only demand charges none
        tokens, seqs = scheduler_defaults(offer.gpu, request, vllm_release(request.vllm_version))
        parts.append(f"--max-num-seqs {seqs} --max-num-batched-tokens {tokens}")
    head, workers = across_nodes(" ".join(parts), nodes, partial(rank_flags, nodes))
    return _evaluation(inst, head, workers, meeting_ports(head) if workers else ())


def _llamacpp(inst: Instance, model_id: str, nodes: Sequence[tuple[str, list[int]]]) -> Evaluation:
    """llama-server on the head node's cards, an rpc-server on each other node's card; the split in llama.cpp's
    device order (RPC servers first)."""
    request = PlanRequest()
    head_node = nodes[0][0] if nodes else ""
    shards = dict(zip(inst.cards, inst.shard_bytes, strict=True))
    remote: list[tuple[str, int, int]] = []  # (node, GPU index, card) of each RPC server
    cards = iter(inst.cards)
    for node, gpus in nodes:
        for gpu in gpus:
            card = next(cards)
            if node != head_node:
                remote.append((node, gpu, card))
    endpoints, workers, used = [], [], dict.fromkeys((node for node, _gpu, _card in remote), 0)
    for node, gpu, _card in remote:
        port = RPC_FIRST_PORT + used[node]
        used[node] += 1
        endpoints.append(f"<{node}>:{port}")
        rank = next(r for r, (name, _gpus) in enumerate(nodes) if name == node)
        workers.append(NodeCommand(rank=rank, command=f"rpc-server -H 0.0.0.0 -p {port}", devices=(gpu,), where=node))
    order = [card for _node, _gpu, card in remote] + [c for c in inst.cards if c not in {r[2] for r in remote}]
    command = (f"llama-server {_model_arg('llamacpp', model_id)} -c {inst.context_tokens} "
               f"-b {request.batch_tokens} -ub {request.ubatch_tokens} -ngl 999")  # fmt: skip
    if len(order) > 1:
        total = sum(shards[c] for c in order) or 1
        command += " --tensor-split " + ",".join(f"{shards[c] / total:.3f}".rstrip("0").rstrip(".") for c in order)
    if endpoints:
        command += " --rpc " + ",".join(endpoints)
    ports = (*endpoints, *dict.fromkeys(f"-p {e.rpartition(':')[2]}" for e in endpoints))
    return _evaluation(inst, command, tuple(workers), ports)


def _evaluation(inst: Instance, command: str, workers: tuple[NodeCommand, ...], ports: tuple[str, ...]) -> Evaluation:
    """The instance's launch as an engine's evaluation, for :func:`explorer.plan.launch_lines.launch_lines`
    (its memory is the placement's, so no card records)."""
    return Evaluation(cards=(), host=None, max_context_tokens=inst.context_tokens, max_concurrency=1,
                      command=command, workers=workers, meeting_ports=ports)  # fmt: skip


def instance_lines(
    inst: Instance, model_id: str, offer: FleetCards, *, engine: str, port: int, copy: int = 0
) -> list[str]:
    """The lines that start ``inst`` on its GPUs with the memory the placement charged it: the head node's
    server on ``port``, then a line for each other node (``copy``: launches across nodes written before it,
    whose meeting ports are taken)."""
    nodes = _nodes(inst, offer)
    ev = _llamacpp(inst, model_id, nodes) if engine == "llamacpp" else _vllm(inst, model_id, offer, len(nodes))
    if not nodes:
        return [f"{_where(inst, offer)}: {on_devices(ev.command, (), port)}"]
    return launch_lines(ev, nodes, port, copy=copy, bus_order=_several_classes(offer, {n for n, _gpus in nodes}))


def _several_classes(offer: FleetCards, names: set[str]) -> bool:
    """Whether a node among ``names`` holds cards of more than one class, where CUDA's own order (fastest
    first) may differ from the node's, so the lines fix it (``CUDA_DEVICE_ORDER=PCI_BUS_ID``)."""
    classes: dict[str, set[str | None]] = {}
    for card in offer.cards:
        node = offer.places[card.index][0] if card.index < len(offer.places) else None
        if node in names:
            classes.setdefault(node, set()).add(card.gpu_class)
    return any(len(found) > 1 for found in classes.values())


def launch_rows(
    placement: Placement, offer: FleetCards, model_ids: Mapping[str, str], *, engine: str, base_port: int = FIRST_PORT
) -> list[dict[str, Any]]:
    """One row an instance (:data:`LAUNCH_COLUMNS`): its model, replica, GPUs and launch lines (a server's port
    counts up from ``base_port`` on its head node).

    ``model_ids``: the placement's model name -> the id to launch (a Hub id or a path).
    """
    rows = []
    servers: dict[str, int] = {}  # head node -> servers already started there
    spanning = 0  # launches across nodes written so far
    for inst in placement.instances:
        nodes = _nodes(inst, offer)
        head = nodes[0][0] if nodes else ""
        port = base_port + servers.get(head, 0)
        servers[head] = servers.get(head, 0) + 1
        lines = instance_lines(inst, model_ids.get(inst.model, inst.model), offer, engine=engine, port=port,
                               copy=spanning)  # fmt: skip
        spanning += len(nodes) > 1
        rows.append(
            {
                "model": inst.model,
                "replica": str(inst.replica),
                "where": _where(inst, offer),
                "command": "\n".join(lines),
            }
        )
    return rows
