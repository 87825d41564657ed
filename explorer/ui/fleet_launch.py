"""How to start each instance of a placement: its node, its GPU list and the engine's command.

A placement pins each instance to cards by index in the fleet
(:func:`explorer.fleet.footprints.fleet_cards`); :attr:`FleetCards.places`
says which node and which GPU of that node each card is. The command limits
the process to those GPUs (``CUDA_VISIBLE_DEVICES``) and asks the engine for
exactly the memory the placement charged it:

- vLLM: ``--gpu-memory-utilization`` is the largest share of a card the
  instance is charged, rounded *up* to the hundredth (vLLM budgets that share
  of every card it uses); several cards are ``--tensor-parallel-size``.
- llama.cpp: every layer on the GPUs (``-ngl 999``), and several cards are a
  ``--tensor-split`` in the proportions the placement split the weights and KV.

Each instance gets its own port (8000, 8001, ...). Text only: no marimo.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from explorer.fleet.footprints import FleetCards
from explorer.fleet.result import Instance, Placement

__all__ = ["LAUNCH_COLUMNS", "launch_command", "launch_rows"]

#: the launch table's columns
LAUNCH_COLUMNS = ("model", "replica", "where", "command")


def _model_arg(engine: str, model_id: str) -> str:
    if engine == "llamacpp":
        local = model_id.endswith(".gguf") or model_id.startswith(("/", ".", "~"))
        return f"-m {model_id}" if local else f"-hf {model_id}"
    return model_id


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
    n = len(inst.cards) if gpu_lists else 1
    if engine == "llamacpp":
        cmd = f"llama-server {_model_arg(engine, model_id)} -c {inst.context_tokens} -ngl 999 --port {port}"
        if n > 1:
            total = sum(inst.shard_bytes) or 1
            cmd += " --tensor-split " + ",".join(f"{b / total:.3f}".rstrip("0").rstrip(".") for b in inst.shard_bytes)
        return env + cmd
    cmd = f"vllm serve {model_id} --max-model-len {inst.context_tokens} --port {port}"
    if gpu_lists:
        share = max(b / (offer.cards[c].total_bytes or offer.cards[c].usable_bytes)
                    for b, c in zip(inst.split_bytes, inst.cards, strict=True))  # fmt: skip
        cmd += f" --gpu-memory-utilization {math.ceil(share * 100) / 100:.2f}"
    if n > 1:
        cmd += f" --tensor-parallel-size {n}"
    if len(gpu_lists) > 1:
        cmd += " --distributed-executor-backend ray"  # the instance spans nodes
    return env + cmd


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
