"""A room map that keeps its cards roomiest first as charges change.

The planner asks, for every instance it places, "the fewest roomiest cards that
hold it". Sorting the whole fleet for each question makes placing grow with
instances x cards x log(cards): 800 models with their replicas on 4,000 cards
took over 5 s. :class:`Rooms` keeps the order instead: a card's room changes by
one bisection (moving one entry of a list), and a question walks the order from
the roomiest card and stops as soon as it has its answer, so a layout of k cards
looks at about k cards. A :meth:`Rooms.where` view walks the same order, skipping
the cards it leaves out (another class, a card already holding a replica).

The order: most free bytes first, equal room to the lower card index. A card's
class (for engines that split evenly, over one class only) is known to the map,
and :meth:`Rooms.by_class` gives one view a class.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterator, Mapping


class Rooms(Mapping[int, int]):
    """Free bytes per card (a read-only mapping, in the order given), with the cards roomiest first.

    Views made by :meth:`where` share the parent's rooms and order, so they see every later :meth:`set`.
    """

    __slots__ = ("_class_names", "_classes", "_keep", "_order", "_room")

    def __init__(self, room: Mapping[int, int], classes: Mapping[int, str | None] | None = None) -> None:
        self._room = dict(room)
        self._order = sorted((-free, card) for card, free in self._room.items())
        self._keep: Callable[[int], bool] | None = None
        self._classes = classes or {}
        # the classes of this map's cards, in order of first card (None: a card of no known class)
        self._class_names = tuple(dict.fromkeys(self._classes.get(card) for card in self._room))

    def __getitem__(self, card: int) -> int:
        if self._keep is not None and card in self._room and not self._keep(card):
            raise KeyError(card)
        return self._room[card]

    def __iter__(self) -> Iterator[int]:
        if self._keep is None:
            return iter(self._room)
        return filter(self._keep, self._room)

    def __len__(self) -> int:
        return len(self._room) if self._keep is None else sum(1 for _ in self)

    def roomiest(self) -> Iterator[int]:
        """The cards, most free bytes first (equal room: lower index first); lazy, so a caller may stop early."""
        cards = (card for _, card in self._order)
        return cards if self._keep is None else filter(self._keep, cards)

    def where(self, keep: Callable[[int], bool]) -> Rooms:
        """A view of the cards for which ``keep(card)`` is true (and this view's own test, if any)."""
        view = Rooms.__new__(Rooms)
        view._room, view._order = self._room, self._order
        view._classes, view._class_names = self._classes, self._class_names
        outer = self._keep
        view._keep = keep if outer is None else (lambda card: outer(card) and keep(card))
        return view

    def by_class(self) -> Iterator[Rooms]:
        """One view a card class, in order of first card (this map itself when no card has a known class).

        A view of a view may hold no card of some class; such a view is empty, never an error.
        """
        if not self._classes:
            yield self
            return
        for name in self._class_names:
            yield self.where(lambda card, name=name: self._classes.get(card) == name)

    def set(self, card: int, free_bytes: int) -> None:
        """Give ``card`` ``free_bytes`` of room, moving it to its place in the order."""
        old = self._room[card]
        if old == free_bytes:
            return
        del self._order[bisect_left(self._order, (-old, card))]
        insort(self._order, (-free_bytes, card))
        self._room[card] = free_bytes
