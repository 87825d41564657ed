"""The lines that start one launch where the plan put it: its devices, its port, a line for each node.

An engine's command says how to serve the model; where it runs is the plan's: which node, which cards of it,
which port. A launch line is ``WHERE: CUDA_VISIBLE_DEVICES=… COMMAND --port P``:

- **devices**: the card positions on the node (``NODE:INDEX``'s index, numbered across the node's classes as
  CUDA numbers them), in the order the command's figures assume. llama.cpp splits the layers in that order
  (``--tensor-split``), so a node whose card 0 is an RTX 4090 and card 1 an L40S, split largest first,
  runs with ``CUDA_VISIBLE_DEVICES=1,0``; on a node of several classes the line also fixes how CUDA numbers
  them (``CUDA_DEVICE_ORDER=PCI_BUS_ID``: the node's order, not CUDA's fastest-first);
- **port**: one a server on a node, counting up from :data:`FIRST_PORT` (vLLM, SGLang and llama-server all
  take ``--port``);
- **nodes**: a launch across nodes is a line a node, the head's first (its API server and port), then each
  other rank's (:class:`~explorer.engines.common.NodeCommand`: vLLM ``--headless`` workers, SGLang ranks,
  llama.cpp ``rpc-server``s on their own cards), each naming the head's address by a placeholder that names
  the head node (``--master-addr <gpu-a>``).
"""

from __future__ import annotations

from collections.abc import Sequence

from explorer.engines.common import HEAD_ADDRESS, Evaluation
from explorer.hardware.cards import class_cards
from explorer.hardware.cluster import Node

#: the first server's port on a node; further servers on the node count up from it
FIRST_PORT = 8000


def class_positions(node: Node, gpu_class: str, count: int) -> list[int]:
    """The positions of a node's first ``count`` cards of one class (``count`` at most: a node of 100,000 cards
    costs only those)."""
    return [c.position for c in class_cards(node, gpu_class, count)]


def several_classes(node: Node | None) -> bool:
    """Whether a node holds cards of more than one class (where CUDA's own order, fastest first, may differ
    from the node's)."""
    return node is not None and len({g.gpu.name for g in node.gpus}) > 1


def on_devices(command: str, devices: Sequence[int], port: int | None = None, *, bus_order: bool = False) -> str:
    """``command`` on exactly ``devices`` (``CUDA_VISIBLE_DEVICES``, none for a CPU or a Mac), with its port.

    ``bus_order``: number the devices as the node does (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, nvidia-smi's order)
    rather than CUDA's default, fastest first, which on a node of several classes may put another card first.
    """
    env = f"CUDA_VISIBLE_DEVICES={','.join(str(d) for d in devices)} " if devices else ""
    if devices and bus_order:
        env = f"CUDA_DEVICE_ORDER=PCI_BUS_ID {env}"
    return f"{env}{command}" + (f" --port {port}" if port is not None else "")


def launch_lines(
    evaluation: Evaluation, nodes: Sequence[tuple[str, Sequence[int]]], port: int, *, bus_order: bool = False
) -> list[str]:
    """One launch's lines: the head's command on ``nodes[0]`` (its name and card positions) with ``port``, then
    each other node's command on its cards (a worker the engine placed itself, an RPC server, names its own).
    ``bus_order``: a node of the launch holds several classes (:func:`on_devices`)."""
    head, head_devices = nodes[0]
    named = _head_named(head)
    devices = evaluation.devices or head_devices
    lines = [f"{head}: {on_devices(named(evaluation.command), devices, port, bus_order=bus_order)}"]
    for worker in evaluation.workers:
        if worker.where:
            name, devices = worker.where, worker.devices
        elif worker.rank < len(nodes):
            name, devices = nodes[worker.rank][0], worker.devices or nodes[worker.rank][1]
        else:  # a rank beyond the nodes named: as many cards as the head's, on a node the user picks
            name, devices = f"<node{worker.rank + 1}>", worker.devices or head_devices
        lines.append(f"{name}: {on_devices(named(worker.command), devices, bus_order=bus_order)}")
    return lines


def _head_named(head: str):
    """The head's address placeholder naming the head node (``<head-node>`` → ``<gpu-a>``), when it is one."""
    if head.startswith("<") or " " in head:
        return lambda command: command
    return lambda command: command.replace(HEAD_ADDRESS, f"<{head}>")
