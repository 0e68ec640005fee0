"""The SSE encoding of the frequent frames: ``encode_frame`` writes a ``text.delta`` or
``thinking.delta`` the short way (``sse._delta_event``), and its bytes are exactly those of
the general encoder (``encode_event``: the frame's dict through ``json.dumps`` and FastAPI's
``format_sse_event``) for any text, and any frame the short way cannot write goes the
general way. Every other frame is written the same way without ``json.dumps`` making an
encoder and FastAPI splitting the data into lines (``sse._any_event``): the same bytes."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ostinato.frames import (
    FRAME_TYPES,
    Frame,
    MessageCommitted,
    TextDeltaFrame,
    ThinkingDeltaFrame,
)
from ostinato.messages import JSON, Message, TextBlock
from ostinato.server import sse
from ostinato.server.sse import encode_event, encode_frame

ODD_TEXTS = [
    "",
    " word",
    'she said "no"',
    "back\\slash \\n not a newline",
    "line\nbreak",
    "carriage\rreturn and \r\n both",
    "tab\tand\x00nul\x01\x1f\x7f",
    "\x85 next line, \u2028 line and \u2029 paragraph separators",
    "é ñ 中文 日本語 🎵🎶 \U0001f600",
    "\ufeff byte order mark, \ufffd replacement",
    "data: not a field\n\nevent: nor this",
    "</script><!-- -->",
    "x" * 10_000,
]
DELTAS = (TextDeltaFrame, ThinkingDeltaFrame)


def test_both_delta_frames_take_the_short_way() -> None:
    # if a field is added to one of them, _delta_event must learn it (until then the
    # frame is written the general way, and this fails to say so)
    short_way = dict(sse._DELTA_FRAMES)
    assert short_way == {TextDeltaFrame: "text.delta", ThinkingDeltaFrame: "thinking.delta"}


@pytest.mark.parametrize("cls", DELTAS)
@pytest.mark.parametrize("text", ODD_TEXTS)
def test_odd_text_is_written_byte_for_byte_as_the_general_encoder_does(
    cls: type[TextDeltaFrame | ThinkingDeltaFrame], text: str
) -> None:
    frame = cls(run_id="run_01JH8ZK3Q4W5E6R7T8Y9U0I1O2", seq=7, text=text)
    assert encode_frame(frame) == encode_event(frame)


@pytest.mark.parametrize("cls", DELTAS)
@pytest.mark.parametrize("seq", [0, 1, -1, 2**63, 10**30])
@pytest.mark.parametrize("run_id", ["", "run_x", 'r"u\nn', "rün 🎵"])
def test_odd_run_ids_and_seqs_too(
    cls: type[TextDeltaFrame | ThinkingDeltaFrame], seq: int, run_id: str
) -> None:
    frame = cls(run_id=run_id, seq=seq, text="hi")
    assert encode_frame(frame) == encode_event(frame)


@given(text=st.text(), run_id=st.text(max_size=40), seq=st.integers())
def test_any_text_is_written_as_the_general_encoder_does(text: str, run_id: str, seq: int) -> None:
    for cls in DELTAS:
        frame = cls(run_id=run_id, seq=seq, text=text)
        assert encode_frame(frame) == encode_event(frame)


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb"])
def test_a_lone_surrogate_fails_alike(text: str) -> None:
    frame = TextDeltaFrame(run_id="run_1", seq=1, text=text)  # no UTF-8 for it, either way
    with pytest.raises(UnicodeEncodeError):
        encode_event(frame)
    with pytest.raises(UnicodeEncodeError):
        encode_frame(frame)


def test_the_written_event_is_one_data_line_of_the_frame() -> None:
    frame = TextDeltaFrame(run_id="run_1", seq=3, text='a "b"\nc')
    assert encode_frame(frame) == (
        b'event: text.delta\ndata: {"run_id":"run_1","seq":3,'
        b'"text":"a \\"b\\"\\nc","type":"text.delta"}\n\n'
    )


def test_frames_the_short_way_cannot_write_go_the_general_way() -> None:
    odd = [
        TextDeltaFrame(run_id="run_1", seq=True, text="a"),  # json writes true
        TextDeltaFrame(run_id=None, seq=1, text="a"),  # type: ignore[arg-type]  # null
        TextDeltaFrame(run_id="run_1", seq=1, text=None),  # type: ignore[arg-type]
        TextDeltaFrame(run_id="run_1", seq=1, text="a", type="odd\ntype"),  # type: ignore[arg-type]
    ]
    for frame in odd:
        assert encode_frame(frame) == encode_event(frame)


# --- every other frame: written without ``json.dumps`` and ``format_sse_event`` ---------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.datetimes(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)  # a datetime is written by ``default=str``, NaN and infinities as json writes them
JSON_OBJECTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)
MESSAGES = st.builds(
    Message,
    st.sampled_from(["user", "assistant", "tool"]),
    st.lists(st.builds(TextBlock, st.text()), max_size=2).map(tuple),
    id=st.text(max_size=8),
    seq=st.integers(),
    metadata=JSON_OBJECTS,
)


def _any_frame(cls: type[Frame]) -> st.SearchStrategy[Frame]:
    hints = typing.get_type_hints(cls)
    given_: dict[str, st.SearchStrategy[Any]] = {}
    for name, hint in hints.items():
        if hint == JSON:
            given_[name] = JSON_OBJECTS
        elif JSON in typing.get_args(hint):
            given_[name] = st.none() | JSON_OBJECTS
        elif hint is Message:
            given_[name] = MESSAGES
    return st.builds(cls, **given_)


FRAME_CLASSES: tuple[type[Frame], ...] = typing.get_args(Frame)


@given(frame=st.one_of([_any_frame(cls) for cls in FRAME_CLASSES]))
def test_every_frame_is_written_as_the_general_encoder_does(frame: Frame) -> None:
    try:
        expected = encode_event(frame)
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for it, either way
        with pytest.raises(UnicodeEncodeError):
            encode_frame(frame)
        return
    assert encode_frame(frame) == expected


def test_every_frame_class_is_in_the_test() -> None:
    assert len(FRAME_CLASSES) == len(FRAME_TYPES)


def test_a_durable_frame_with_an_odd_seq_goes_the_general_way() -> None:
    message = Message("user", (TextBlock("hi"),))
    for seq in (True, "7\nid: 8"):
        frame = MessageCommitted(run_id="run_1", seq=seq, message=message)  # type: ignore[arg-type]
        assert encode_frame(frame) == encode_event(frame)
