"""The command line's workload options (``--users``/``--rate``, ``--prompt``, ``--answer``, ``--ttft``…), made from
the :class:`~explorer.speed.workload.Workload`'s own declarations, as the request's are
(:mod:`explorer.cli.request_args`); ``explorer plan`` and ``explorer size`` take them.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from explorer.cli.request_args import add_setting_arguments
from explorer.engines.setting import declared_settings
from explorer.errors import PlanError
from explorer.sources.shipped import read_user_text
from explorer.speed.workload import Workload, parse_lengths

__all__ = ["WORKLOAD_SETTINGS", "add_workload_arguments", "workload_from_args"]

#: the workload's settings, in declaration order
WORKLOAD_SETTINGS = declared_settings(Workload)


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """One option per workload setting, in a ``workload`` group."""
    group = p.add_argument_group("workload (sizing: explorer size, or plan with --users/--rate)")
    add_setting_arguments(group, settings=WORKLOAD_SETTINGS)
    group.add_argument(
        "--lengths",
        default=None,
        metavar="CSV",
        help="a CSV of real requests (columns prompt_tokens,answer_tokens): their means replace --prompt and "
        "--answer, --ttft-percentile p90 checks the TTFT at the 90th-percentile prompt, and their spread sets "
        "the p90 TPOT",
    )


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The workload of the parsed options (users and rate both None: nothing to size); ``--lengths`` gives the
    prompt and answer means, the p90 prompt and both deciles.

    Raises:
        PlanError: the lengths file cannot be read or is malformed.
    """
    workload = Workload(**{s.field: getattr(args, s.field) for s in WORKLOAD_SETTINGS})
    path = getattr(args, "lengths", None)
    if not path:
        return workload
    lengths = parse_lengths(read_user_text(path, "the lengths CSV", PlanError), source=path)
    return replace(workload, prompt_tokens=lengths.prompt_mean_tokens, answer_tokens=lengths.answer_mean_tokens,
                   prompt_p90_tokens=lengths.prompt_p90_tokens, prompt_deciles=lengths.prompt_deciles,
                   answer_deciles=lengths.answer_deciles)  # fmt: skip
