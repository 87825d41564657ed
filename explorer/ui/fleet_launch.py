"""How to start each instance of a placement: its node, its GPU list and the engine's command.

A placement pins each instance to cards by index in the fleet
(:func:`explorer.fleet.footprints.fleet_cards`); :attr:`FleetCards.places`
says which node and which GPU of that node each card is. The command limits
the process to those GPUs (``CUDA_VISIBLE_DEVICES``) and asks the engine for
exactly the memory the placement charged it, as the engine writes it
(:meth:`explorer.engines.interface.Engine.fleet_command`: vLLM's
``--gpu-memory-utilization``, SGLang's ``--mem-fraction-static``, llama.cpp's
``--tensor-split``).

Each instance gets its own port (8000, 8001, ...). Text only: no marimo.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.engines.interface import FleetLaunch
from explorer.engines.registry import engine_named
from explorer.fleet.footprints import FleetCards
from explorer.fleet.result import Instance, Placement

__all__ = ["LAUNCH_COLUMNS", "launch_command", "launch_rows"]

#: the launch table's columns
LAUNCH_COLUMNS = ("model", "replica", "where", "command")


def _where(inst: Instance, offer: FleetCards) -> tuple[str, list[str]]:
    """(where it runs, in words; one ``CUDA_VISIBLE_DEVICES`` list per node)."""
    if not inst.cards or inst.cards[0] < 0 or not offer.places:
        return "the unified-memory pool", []
    by_node: dict[str, list[int]] = {}
    for card in inst.cards:
        node, index = offer.places[card]
        by_node.setdefault(node, []).append(index)
    where = " + ".join(f"{node} GPUs {','.join(map(str, gpus))}" for node, gpus in by_node.items())
    return where, [",".join(map(str, gpus)) for gpus in by_node.values()]


def launch_command(inst: Instance, model_id: str, offer: FleetCards, *, engine: str, port: int) -> str:
    """The command that starts ``inst`` on its GPUs with the memory the placement charged it."""
    _where_text, gpu_lists = _where(inst, offer)
    env = f"CUDA_VISIBLE_DEVICES={gpu_lists[0]} " if len(gpu_lists) == 1 else ""
    share = None
    if gpu_lists:
        share = max(b / (offer.cards[c].total_bytes or offer.cards[c].usable_bytes)
                    for b, c in zip(inst.split_bytes, inst.cards, strict=True))  # fmt: skip
    fleet = FleetLaunch(
        context_tokens=inst.context_tokens,
        cards=len(inst.cards) if gpu_lists else 1,
        shard_bytes=tuple(inst.shard_bytes),
        share=share,
        nodes=len(gpu_lists),
        port=port,
    )
    return env + engine_named(engine).fleet_command(model_id, fleet)


def launch_rows(
    placement: Placement, offer: FleetCards, model_ids: Mapping[str, str], *, engine: str, base_port: int = 8000
) -> list[dict[str, Any]]:
    """One row an instance (:data:`LAUNCH_COLUMNS`): its model, replica, GPUs and command.

    ``model_ids``: the placement's model name -> the id to launch (a Hub id or a path).
    """
    rows = []
    for port, inst in enumerate(placement.instances, base_port):
        where, _lists = _where(inst, offer)
        model_id = model_ids.get(inst.model, inst.model)
        rows.append(
            {
                "model": inst.model,
                "replica": str(inst.replica),
                "where": where,
                "command": launch_command(inst, model_id, offer, engine=engine, port=port),
            }
        )
    return rows
