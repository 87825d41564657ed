"""How to start each instance of a placement: its node, its GPUs and the engine's launch lines.

A placement pins each instance to cards by index in the fleet
(:func:`explorer.fleet.footprints.fleet_cards`); :attr:`FleetCards.places`
says which node and which GPU of that node each card is. Each instance gets the
planner's treatment (:mod:`explorer.plan.launch_lines`): ``CUDA_VISIBLE_DEVICES``
on each node in the order the split assumes (``CUDA_DEVICE_ORDER=PCI_BUS_ID`` on
a node of several classes), one port a server on a node (8000, 8001, ...), a line a node for
an instance across nodes, each further such launch meeting at ports of its own,
and every setting the placement's footprint assumed, as each engine writes it
(:meth:`explorer.engines.interface.Engine.fleet_command`):

- vLLM: ``--gpu-memory-utilization`` is the largest share of a card the
  instance is charged, rounded *up* to the hundredth (vLLM budgets that share
  of every card it uses); several cards are ``--tensor-parallel-size``; the
  scheduler's batch sizes are vLLM's defaults for the card, which the footprint
  was measured at (:func:`explorer.engines.vllm_budget.scheduler_defaults`);
  across nodes, vLLM's multiprocessing backend: ``--nnodes``, ``--node-rank``,
  the head's address and ``--master-port``, ``--headless`` above rank 0.
- llama.cpp: the GGUF the footprint was sized at (the converted weights' placeholder with the conversion's
  ``--outtype``, as the planner prints it; a .gguf the user named as it is) and its KV cache (``-ctk``/``-ctv``,
  ``-fa on`` for a quantised V), every layer on the GPUs (``-ngl 999``), the batch sizes the
  footprint was measured at (``-b``, ``-ub``), and several cards are a
  ``--tensor-split`` in the proportions the placement split the weights and KV;
  across nodes, the other nodes' cards are ``rpc-server``s (one a card), and the
  split follows llama.cpp's device order: the RPC servers first, in ``--rpc``
  order, then the local GPUs (``src/llama.cpp``: "add RPC servers at the front
  of the list").
- SGLang: ``--mem-fraction-static`` the largest share charged, rounded up as vLLM's; several cards are
  ``--tp-size``; across nodes a rank a node meeting at the head's ``--dist-init-addr``.

A tight model (placed although it fits nowhere) gets no launch line, since its server would run out of memory:
its row says how far short it is and what would make room (:func:`not_launched`).

Text only: no marimo.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.engines.interface import FleetLaunch
from explorer.engines.registry import engine_named
from explorer.fleet.footprints import FleetCards
from explorer.fleet.result import Instance, Placement, TightModel
from explorer.plan.launch_lines import FIRST_PORT, launch_lines, on_devices
from explorer.units import gib

__all__ = ["LAUNCH_COLUMNS", "instance_lines", "launch_rows", "not_launched"]

#: the launch table's columns
LAUNCH_COLUMNS = ("model", "replica", "where", "command")


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


def _fleet_launch(inst: Instance, offer: FleetCards, nodes: list[tuple[str, list[int]]]) -> FleetLaunch:
    """What the engine's launch needs of the instance: its context, cards, charges and nodes."""
    share = None
    if nodes:
        share = max(b / (offer.cards[c].total_bytes or offer.cards[c].usable_bytes)
                    for b, c in zip(inst.split_bytes, inst.cards, strict=True))  # fmt: skip
    return FleetLaunch(
        context_tokens=inst.context_tokens,
        cards=len(inst.cards),
        shard_bytes=tuple(inst.shard_bytes),
        share=share,
        nodes=tuple((node, tuple(gpus)) for node, gpus in nodes),
        gpu=offer.gpu,
        load_flags=inst.load_flags,
        kv_shards=inst.kv_shards,
    )


def instance_lines(
    inst: Instance, model_id: str, offer: FleetCards, *, engine: str, port: int, copy: int = 0
) -> list[str]:
    """The lines that start ``inst`` on its GPUs with the memory the placement charged it: the head node's
    server on ``port``, then a line for each other node (``copy``: launches across nodes written before it,
    whose meeting ports are taken)."""
    nodes = _nodes(inst, offer)
    ev = engine_named(engine).fleet_command(model_id, _fleet_launch(inst, offer, nodes))
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


def not_launched(tight: TightModel) -> str:
    """What stands in a tight model's launch line: a line that would run out of memory is never printed."""
    cards = ", ".join(map(str, tight.cards))
    return (
        f"# not launched: {tight.model} is {gib(tight.shortfall_bytes)} short on card(s) {cards}, so its server would run "
        "out of memory; free those cards, add cards, or place it quantised (--quant int8 or int4-awq)"
    )


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
    tight = {t.model: t for t in placement.tight}
    for inst in placement.instances:
        if inst.model in tight:
            rows.append({"model": inst.model, "replica": str(inst.replica), "where": _where(inst, offer),
                         "command": not_launched(tight[inst.model])})  # fmt: skip
            continue
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
