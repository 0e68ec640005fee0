"""What callers may choose as a model (``ostinato.models.allowed``): a table of cases."""

from __future__ import annotations

import pytest

from ostinato.config import load_config
from ostinato.models.allowed import ModelChoices, ModelNotAllowed
from ostinato.models.choice import Tiers

TIERS = Tiers.for_default("openai:gpt-4.1")  # minuet gpt-4.1-mini, allegro gpt-4.1, forte gpt-5
DEFAULT = ModelChoices.of(None, TIERS, "openai:gpt-4.1")


@pytest.mark.parametrize(
    ("choices", "name", "own_key", "own_server", "allowed"),
    [
        (DEFAULT, "minuet", False, False, True),
        (DEFAULT, "FORTE", False, False, True),
        (DEFAULT, "openai:gpt-5", False, False, True),  # what forte resolves to
        (DEFAULT, "openai:o1-pro", False, False, False),
        (DEFAULT, "openai:o1-pro", True, False, False),  # a key lifts it only if allowed
        (DEFAULT, "openai:o1-pro", False, True, True),  # its own server: no key of ours
        (DEFAULT, "largo", False, False, False),  # no such tier
        (ModelChoices.of(["minuet"], TIERS, "x:y"), "openai:gpt-4.1-mini", False, False, True),
        (ModelChoices.of(["minuet"], TIERS, "x:y"), "allegro", False, False, False),
        (ModelChoices.of(["openai:gpt-5"], TIERS, "x:y"), "forte", False, False, True),
        (ModelChoices.of([], TIERS, "x:y"), "minuet", False, False, False),
        (ModelChoices.of([], TIERS, "x:y", own_key_lifts=True), "openai:o1", True, False, True),
    ],
)
def test_what_may_be_chosen(
    choices: ModelChoices, name: str, own_key: bool, own_server: bool, allowed: bool
) -> None:
    assert choices.allows(name, own_key=own_key, own_server=own_server) is allowed


def test_a_refusal_is_a_403_listing_the_choices() -> None:
    with pytest.raises(ModelNotAllowed) as refused:
        DEFAULT.check("openai:o1-pro")
    assert refused.value.status == 403
    assert "minuet, allegro, forte, openai:gpt-4.1-mini" in refused.value.message
    assert refused.value.details == [{"choosable": list(DEFAULT.names)}]


def test_the_setting_comes_from_the_environment() -> None:
    config, _ = load_config(None, env={"OSTINATO_MODELS__CHOOSABLE": "minuet, openai:gpt-4.1"})
    assert config.models.choosable == ["minuet", "openai:gpt-4.1"]
    assert load_config(None, env={})[0].models.choosable is None
