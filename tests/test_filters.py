"""Output filters: each filter's effect, and the same output however the text is cut."""

from __future__ import annotations

import random

import pytest

from ostinato.filters import NO_FILTERS, OutputFilters, short_url

ALL = OutputFilters(
    strip_tool_syntax=True,
    strip_json_fences=True,
    drop_phrases=("Great question!", "as an AI language model,", "as an AI"),
    shorten_urls=True,
)


def streamed(filters: OutputFilters, deltas: list[str]) -> str:
    chain = filters.chain()
    return "".join(chain.feed(d) for d in deltas) + chain.flush()


def cuts(text: str, rng: random.Random) -> list[str]:
    points = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(0, 12))))
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


SAMPLES = [
    "Great question! The answer is 42.",
    'Sure. <tool_call>{"name": "shell", "arguments": {}}</tool_call> Done.',
    "Let me check <function=clock>{}</function> it is noon",
    'Calling now [TOOL_CALLS][{"name": "x"}]',
    "<|python_tag|>clock.call()<|eom_id|>It is noon.",
    '```json\n{"a": [1, 2, 3], "b": "x`y"}\n```\n',
    "```\n[1, 2]\n```",
    "```python\nprint(1)\n```",
    "Here: ```json\n{}\n```",
    "See https://www.example.com/a/b?c=1, and (https://docs.python.org/3/) too.",
    "A [link](https://example.org/x) and http://10.0.0.1:8080/p. As an AI, I think so.",
    "great QUESTION! as an ai language model, I cannot <tool",
    "<<tool_call>x</tool_call>> https://a.b/c) ``` done",
    "",
    "   ",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_the_output_does_not_depend_on_how_the_text_is_cut(text: str) -> None:
    rng = random.Random(text)
    whole = ALL.apply(text)
    for _ in range(200):
        assert streamed(ALL, cuts(text, rng) if len(text) > 1 else [text]) == whole
    assert streamed(ALL, list(text)) == whole  # one character a delta


def test_random_texts_built_from_the_tricky_pieces_cut_anywhere() -> None:
    rng = random.Random(7)
    pieces = [
        "Great ", "question!", " as an AI", " language model,", "<tool_call>", "</tool_call>",
        "<function=", "</function>", "https://", "www.x.org/a", ".", " ", "(", "```", "json\n",
        "{", "}", "\n", "[TOOL_CALLS]", "<", "h", "ttp", "`",
    ]  # fmt: skip
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 20)))
        whole = ALL.apply(text)
        for _ in range(5):
            assert streamed(ALL, cuts(text, rng) if len(text) > 1 else [text]) == whole, text


def test_leaked_tool_calls_are_removed() -> None:
    only = OutputFilters(strip_tool_syntax=True)
    assert only.apply(SAMPLES[1]) == "Sure.  Done."
    assert only.apply(SAMPLES[2]) == "Let me check  it is noon"
    assert only.apply(SAMPLES[3]) == "Calling now "
    assert only.apply(SAMPLES[4]) == "It is noon."
    assert only.apply("an unclosed <tool_call>{...") == "an unclosed "
    assert only.apply("a < b and <tool") == "a < b and <tool"  # not a call after all


def test_a_fenced_json_only_reply_loses_its_fence() -> None:
    only = OutputFilters(strip_json_fences=True)
    assert only.apply(SAMPLES[5]) == '{"a": [1, 2, 3], "b": "x`y"}'
    assert only.apply(SAMPLES[6]) == "[1, 2]"
    assert only.apply(SAMPLES[7]) == SAMPLES[7]  # code, not JSON
    assert only.apply(SAMPLES[8]) == SAMPLES[8]  # text before the fence
    assert only.apply('```json\n{"a": 1}\n```\nand more') == '{"a": 1}\n```\nand more'


def test_phrases_are_dropped_whatever_their_case_even_split_over_deltas() -> None:
    only = OutputFilters(drop_phrases=("Great question!",))
    assert only.apply("GREAT question! Yes.") == " Yes."
    assert streamed(only, ["Gre", "at ques", "tion", "! Yes."]) == " Yes."
    longest = OutputFilters(drop_phrases=("as an AI", "as an AI language model,"))
    assert streamed(longest, ["as an AI", " language model, no"]) == " no"


def test_bare_urls_become_their_host_and_link_targets_stay() -> None:
    only = OutputFilters(shorten_urls=True)
    assert only.apply(SAMPLES[9]) == "See example.com, and (https://docs.python.org/3/) too."
    assert only.apply("go to https://docs.python.org/3/library/re.html.") == (
        "go to docs.python.org."
    )
    assert streamed(only, ["[a](", "https://x.org/y)"]) == "[a](https://x.org/y)"
    assert short_url("https://www.example.com/a") == "example.com"


def test_no_filters_change_nothing() -> None:
    assert not NO_FILTERS.active
    assert NO_FILTERS.apply(SAMPLES[1]) == SAMPLES[1]
    assert NO_FILTERS.over(shorten_urls=True, drop_phrases=None).shorten_urls
