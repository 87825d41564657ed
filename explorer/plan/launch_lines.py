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
  other rank's (:class:`~explorer.engines.evaluation.NodeCommand`: vLLM ``--headless`` workers, SGLang ranks,
  llama.cpp ``rpc-server``s on their own cards), each naming the head's address by a placeholder that names
  the head node (``--master-addr <gpu-a>``); the ``k``-th further copy moves the ports its nodes meet at
  (``Evaluation.meeting_ports``: vLLM's ``--master-port``, SGLang's ``--dist-init-addr``, llama.cpp's RPC
  servers) up by ``k`` × :data:`COPY_PORT_STEP`, so two copies never meet at one port.
"""

from __future__ import annotations

from collections.abc import Sequence

from explorer.engines.evaluation import Evaluation, NodeCommand
from explorer.engines.serve_command import HEAD_ADDRESS
from explorer.hardware.cards import class_cards
from explorer.hardware.cluster import Node

#: the first server's port on a node; further servers on the node count up from it
FIRST_PORT = 8000
#: how far each further copy moves the ports its nodes meet at: SGLang takes the ports just above
#: its ``--dist-init-addr`` port for its own (port + 1 …), so a step of 1 would collide
COPY_PORT_STEP = 100


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
    evaluation: Evaluation,
    nodes: Sequence[tuple[str, Sequence[int]]],
    port: int,
    *,
    bus_order: bool = False,
    copy: int = 0,
) -> list[str]:
    """One launch's lines: the head's command on ``nodes[0]`` (its name and card positions) with ``port``, then
    each other node's command on its cards (a worker the engine placed itself, an RPC server, names its own).
    ``bus_order``: a node of the launch holds several classes (:func:`on_devices`). ``copy``: the launch's
    index among the copies across nodes (the earlier ones' meeting ports are taken: :func:`moved_ports`)."""
    head, head_devices = nodes[0]
    named = _head_named(head)
    seats = worker_seats(evaluation.workers, nodes, head_devices)
    command = moved_ports(evaluation.command, evaluation.meeting_ports, copy)
    for worker, (name, _devices) in zip(evaluation.workers, seats, strict=True):
        if worker.where and worker.where != name:  # an RPC server moved from its placeholder node to the plan's
            command = command.replace(f"{worker.where}:", f"{name}:" if name.startswith("<") else f"<{name}>:")
    devices = evaluation.devices or head_devices
    lines = [f"{head}: {on_devices(named(command), devices, port, bus_order=bus_order)}"]
    for worker, (name, devices) in zip(evaluation.workers, seats, strict=True):
        worker_command = moved_ports(worker.command, evaluation.meeting_ports, copy)
        lines.append(f"{name}: {on_devices(named(worker_command), devices, bus_order=bus_order)}")
    return lines


def placeholder_node(worker: NodeCommand) -> bool:
    """Whether the engine left ``worker`` on a placeholder for its rank's node (``<node1>``: llama.cpp's RPC
    servers in a plan that holds for any nodes of a pool), for the launch lines to name."""
    return worker.where == f"<node{worker.rank}>"


def worker_seats(
    workers: Sequence[NodeCommand], nodes: Sequence[tuple[str, Sequence[int]]], head_devices: Sequence[int]
) -> list[tuple[str, Sequence[int]]]:
    """Where each other node's command runs (its node's name, its cards): on a placeholder node
    (:func:`placeholder_node`) that the plan placed, that node, its ``j``-th server on the node's ``j``-th
    card; on a node the engine named, there; on a rank the plan placed, its node; else a node the user picks
    (as many cards as the head's)."""
    out: list[tuple[str, Sequence[int]]] = []
    taken: dict[int, int] = {}
    for worker in workers:
        if placeholder_node(worker) and worker.rank < len(nodes):
            name, cards = nodes[worker.rank]
            first = taken.get(worker.rank, 0)
            width = max(1, len(worker.devices))
            taken[worker.rank] = first + width
            out.append((name, cards[first : first + width] or worker.devices))
        elif worker.where:
            out.append((worker.where, worker.devices))
        elif worker.rank < len(nodes):
            out.append((nodes[worker.rank][0], worker.devices or nodes[worker.rank][1]))
        else:
            out.append((f"<node{worker.rank + 1}>", worker.devices or head_devices))
    return out


def _head_named(head: str):
    """The head's address placeholder naming the head node (``<head-node>`` → ``<gpu-a>``), when it is one."""
    if head.startswith("<") or " " in head:
        return lambda command: command
    return lambda command: command.replace(HEAD_ADDRESS, f"<{head}>")


def moved_ports(command: str, meeting_ports: Sequence[str], copy: int) -> str:
    """``command`` with each text of ``meeting_ports`` (ending in a port) moved up by ``copy`` × :data:`COPY_PORT_STEP`:
    ``--dist-init-addr <head-node>:5000`` → ``…:5100`` for the second copy."""
    for text in meeting_ports if copy else ():
        flag, number = _split_port(text)
        command = command.replace(text, f"{flag}{int(number) + copy * COPY_PORT_STEP}")
    return command


def _split_port(text: str) -> tuple[str, str]:
    """(everything before the port, the port) of a text that ends in a port."""
    stem = text.rstrip("0123456789")
    return stem, text[len(stem) :]
