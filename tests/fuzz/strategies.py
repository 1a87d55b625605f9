"""Hypothesis strategies shared by the fuzz tests.

``json_values`` are plain JSON values as Python holds them; ``hostile_values``
mix in everything canonical JSON must refuse (sets, bytes, objects, NaN,
infinities, non-string keys, lone surrogates, container and scalar
subclasses, huge integers), so a fuzz run meets both sides of the boundary.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from typing import Any

from hypothesis import strategies as st


class _Str(str):
    __slots__ = ()


class _Int(int):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _List(list):  # type: ignore[type-arg]
    pass


class _Color(enum.IntEnum):
    RED = 1


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


def _power_of_ten(digits: int) -> int:
    """Return 10**digits (beyond 4300 digits Python refuses to print it)."""
    return int(10**digits)


# Text with every category, lone surrogates (Cs) included.
any_text = st.text(alphabet=st.characters(codec=None), max_size=12)
clean_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | finite_floats
    | clean_text
)

json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(clean_text, inner, max_size=4)
    ),
    max_leaves=12,
)

json_objects: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    clean_text, json_values, max_size=4
)

hostile_scalars = (
    json_scalars
    | any_text
    | st.floats()
    | st.binary(max_size=4)
    | st.just(b"")
    | st.builds(_Opaque)
    | st.sampled_from([_Color.RED, float("nan"), float("-inf")])
    | st.integers(min_value=4290, max_value=4310).map(_power_of_ten)
    | clean_text.map(_Str)
    | st.integers().map(_Int)
    | st.frozensets(st.integers(), max_size=2)
    | st.complex_numbers(allow_nan=False, max_magnitude=10)
)

hostile_keys = (
    any_text
    | st.integers()
    | st.floats()
    | st.none()
    | st.booleans()
    | st.tuples(st.integers())
    | clean_text.map(_Str)
)

hostile_values: st.SearchStrategy[Any] = st.recursive(
    hostile_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(_List)
        | st.tuples(inner, inner)
        | st.sets(st.integers(), max_size=2)
        | st.dictionaries(hostile_keys, inner, max_size=3)
        | st.dictionaries(clean_text, inner, max_size=3).map(_Dict)
        | st.dictionaries(clean_text, inner, max_size=3).map(OrderedDict)
    ),
    max_leaves=12,
)
