"""Rooms: free bytes per card with the cards kept roomiest first as their room changes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.fleet.rooms import Rooms


def test_cards_come_roomiest_first_equal_room_to_the_lower_index():
    rooms = Rooms({0: 10, 1: 30, 2: 30, 3: 5})
    assert list(rooms.roomiest()) == [1, 2, 0, 3]
    assert dict(rooms) == {0: 10, 1: 30, 2: 30, 3: 5}  # read in the order given


def test_a_set_moves_the_card_to_its_place():
    rooms = Rooms({0: 10, 1: 30, 2: 30, 3: 5})
    rooms.set(1, 4)  # 30 -> 4: from first to last
    rooms.set(3, 10)  # ties card 0 at 10; card 0 has the lower index
    assert list(rooms.roomiest()) == [2, 0, 3, 1]
    assert rooms[1] == 4


def test_a_view_skips_the_cards_it_leaves_out_and_sees_later_sets():
    rooms = Rooms({0: 10, 1: 30, 2: 20, 3: 5})
    odd = rooms.where(lambda card: card % 2 == 1)
    assert list(odd.roomiest()) == [1, 3]
    assert dict(odd) == {1: 30, 3: 5} and len(odd) == 2
    with pytest.raises(KeyError):
        odd[0]
    rooms.set(3, 40)
    assert list(odd.roomiest()) == [3, 1]
    assert list(odd.where(lambda card: card > 1).roomiest()) == [3]


def test_one_view_a_class_in_order_of_first_card():
    rooms = Rooms({0: 10, 1: 30, 2: 20, 3: 5}, {0: "L40S", 1: "H100", 2: "L40S", 3: "H100"})
    assert [list(view.roomiest()) for view in rooms.by_class()] == [[2, 0], [1, 3]]
    # a view of a view may hold no card of a class: an empty view
    low = rooms.where(lambda card: card in (0, 2))
    assert [list(view.roomiest()) for view in low.by_class()] == [[2, 0], []]
    # no classes known: the map itself
    assert [list(view.roomiest()) for view in Rooms({4: 1, 5: 2}).by_class()] == [[5, 4]]


@given(
    st.dictionaries(st.integers(0, 50), st.integers(0, 100), min_size=1),
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 100))),
)
def test_the_order_after_any_sets_is_the_sorted_order(start, sets):
    rooms, plain = Rooms(start), dict(start)
    for card, free in sets:
        if card in plain:
            rooms.set(card, free)
            plain[card] = free
    assert list(rooms.roomiest()) == sorted(plain, key=lambda card: (-plain[card], card))
    assert dict(rooms) == plain
