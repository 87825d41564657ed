"""explorer.plan.launch_lines: devices, ports and a line a node for one launch."""

from __future__ import annotations

from explorer.engines.evaluation import Evaluation, NodeCommand
from explorer.plan.launch_lines import COPY_PORT_STEP, launch_lines, moved_ports, worker_seats

#: SGLang's two ranks over two nodes, as the engine writes them (explorer.engines.sglang.rank_flags)
SGLANG_HEAD = "python -m sglang.launch_server --model-path o/r --tp-size 4 --nnodes 2 --node-rank 0"
SGLANG_RANK1 = "python -m sglang.launch_server --model-path o/r --tp-size 4 --nnodes 2 --node-rank 1"
DIST = "--dist-init-addr <head-node>:5000"


def _evaluation(command: str, workers: tuple[NodeCommand, ...], meeting_ports: tuple[str, ...]) -> Evaluation:
    return Evaluation(cards=(), host=None, max_context_tokens=4096, max_concurrency=1, command=command,
                      workers=workers, meeting_ports=meeting_ports)  # fmt: skip


def test_two_copies_headed_on_one_node_meet_at_ports_of_their_own():
    """Two SGLang copies over nodes a and b, both headed on a (the second on a's cards 2,3): the first meets at
    a:5000, the second at a:5100 (SGLang takes the ports just above its dist-init port for its own, so a step
    of 1 would collide), and each serves its own port, 8000 and 8001."""
    ev = _evaluation(f"{SGLANG_HEAD} {DIST}", (NodeCommand(rank=1, command=f"{SGLANG_RANK1} {DIST}"),), (DIST,))
    first = launch_lines(ev, [("a", [0, 1]), ("b", [0, 1])], 8000)
    second = launch_lines(ev, [("a", [2, 3]), ("b", [2, 3])], 8001, copy=1)
    assert first == [
        f"a: CUDA_VISIBLE_DEVICES=0,1 {SGLANG_HEAD} --dist-init-addr <a>:5000 --port 8000",
        f"b: CUDA_VISIBLE_DEVICES=0,1 {SGLANG_RANK1} --dist-init-addr <a>:5000",
    ]
    assert second == [
        f"a: CUDA_VISIBLE_DEVICES=2,3 {SGLANG_HEAD} --dist-init-addr <a>:5100 --port 8001",
        f"b: CUDA_VISIBLE_DEVICES=2,3 {SGLANG_RANK1} --dist-init-addr <a>:5100",
    ]
    assert COPY_PORT_STEP == 100


def test_moved_ports_moves_only_the_meeting_ports():
    command = "vllm serve o/r --master-port 29501 --max-num-seqs 29501 --port 8000"
    # only the text that names the meeting port moves, not a number equal to it elsewhere
    assert moved_ports(command, ("--master-port 29501",), 2) == (
        "vllm serve o/r --master-port 29701 --max-num-seqs 29501 --port 8000"
    )
    assert moved_ports(command, ("--master-port 29501",), 0) == command


def test_rpc_servers_on_placeholder_nodes_go_to_the_nodes_the_plan_placed():
    """llama.cpp's RPC servers of an automatic plan sit on <node1> (any node of the pool); placed on node g2's
    cards 4 and 5, the first server gets card 4, the second card 5, and the main server's --rpc names g2."""
    workers = (
        NodeCommand(rank=1, command="rpc-server -H 0.0.0.0 -p 50052", devices=(0,), where="<node1>"),
        NodeCommand(rank=1, command="rpc-server -H 0.0.0.0 -p 50053", devices=(1,), where="<node1>"),
    )
    assert worker_seats(workers, [("g1", [0]), ("g2", [4, 5])], [0]) == [("g2", [4]), ("g2", [5])]
    ev = _evaluation("llama-server -m m.gguf --rpc <node1>:50052,<node1>:50053", workers,
                     ("<node1>:50052", "<node1>:50053", "-p 50052", "-p 50053"))  # fmt: skip
    assert launch_lines(ev, [("g1", [0]), ("g2", [4, 5])], 8000, copy=1) == [
        "g1: CUDA_VISIBLE_DEVICES=0 llama-server -m m.gguf --rpc <g2>:50152,<g2>:50153 --port 8000",
        "g2: CUDA_VISIBLE_DEVICES=4 rpc-server -H 0.0.0.0 -p 50152",
        "g2: CUDA_VISIBLE_DEVICES=5 rpc-server -H 0.0.0.0 -p 50153",
    ]
    # a node the engine named itself (a pinned launch's <gpu-b>) stays where it is
    named = NodeCommand(rank=1, command="rpc-server -H 0.0.0.0 -p 50052", devices=(3,), where="<gpu-b>")
    assert worker_seats([named], [("gpu-a", [0])], [0]) == [("<gpu-b>", (3,))]
