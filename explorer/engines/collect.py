"""Where an engine's walk over a cluster writes what it finds: the ways that fit and the refusals.

The planner hands one :class:`Collector` to every engine's ``walk`` and
reads the options, refusals and counts back; an engine never needs the
planner to report a way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from explorer.engines.layouts import Layout
from explorer.engines.options import Option, Rejection

#: refusals kept in a result; ``pruned`` counts them all
MAX_REJECTIONS = 400


@dataclass(frozen=True, slots=True, kw_only=True)
class Collector:
    """Options, refusals and counts, as a walk finds them (the lists grow; the record is never rebound).

    Attributes:
        options: the ways that fit, in the order found.
        rejected: the first :data:`MAX_REJECTIONS` refusals, with their reasons.
        pruned: refused ways by rule, all of them counted.
    """

    options: list[Option] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    pruned: Counter[str] = field(default_factory=Counter)

    @property
    def considered(self) -> int:
        """Ways considered: every one accepted or refused."""
        return len(self.options) + sum(self.pruned.values())

    def refuse(
        self,
        engine: str,
        layout: Layout | None,
        artifact: str,
        rule: str,
        reason: str,
        option: Option | None = None,
        count: int = 1,
    ) -> None:
        """Count ``count`` ways refused under ``rule``; keep the first few with the reason."""
        self.pruned[rule] += count
        if len(self.rejected) < MAX_REJECTIONS:
            self.rejected.append(
                Rejection(engine=engine, layout=layout, artifact=artifact, rule=rule, reason=reason, option=option)
            )

    def accept(self, option: Option) -> None:
        """Keep a way that fits."""
        self.options.append(option)
