"""The command line's workload options (``--users``/``--rate``, ``--prompt``, ``--answer``, ``--ttft``…), made from
the :class:`~explorer.speed.workload.Workload`'s own declarations, as the request's are
(:mod:`explorer.cli.request_args`); ``explorer plan`` and ``explorer size`` take them.
"""

from __future__ import annotations

import argparse

from explorer.cli.request_args import add_setting_arguments
from explorer.engines.setting import declared_settings
from explorer.speed.workload import Workload

__all__ = ["WORKLOAD_SETTINGS", "add_workload_arguments", "workload_from_args"]

#: the workload's settings, in declaration order
WORKLOAD_SETTINGS = declared_settings(Workload)


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """One option per workload setting, in a ``workload`` group."""
    group = p.add_argument_group("workload (sizing: explorer size, or plan with --users/--rate)")
    add_setting_arguments(group, settings=WORKLOAD_SETTINGS)


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The workload of the parsed options (users and rate both None: nothing to size)."""
    return Workload(**{s.field: getattr(args, s.field) for s in WORKLOAD_SETTINGS})
