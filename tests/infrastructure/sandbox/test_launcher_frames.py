"""The frames the host and its launcher exchange (length + marshal)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from goatherd.infrastructure.sandbox.launch.launcher import frame, unframe

texts = st.text(alphabet=st.characters(codec=None, exclude_categories=()))
values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4)
    ),
    max_leaves=20,
)
messages = st.dictionaries(texts, values, max_size=6)


@given(st.lists(messages, max_size=4))
def test_frames_round_trip_in_order_including_lone_surrogates(
    batch: list[dict[str, object]],
) -> None:
    assert unframe(b"".join(frame(m) for m in batch)) == batch


@given(messages, st.integers(min_value=1, max_value=64))
def test_a_cut_off_last_frame_is_dropped_not_misread(
    message: dict[str, object], cut: int
) -> None:
    first = frame({"first": 1})
    whole = first + frame(message)
    end = max(len(whole) - cut, 0)
    assert unframe(whole[:end]) == ([{"first": 1}] if end >= len(first) else [])
