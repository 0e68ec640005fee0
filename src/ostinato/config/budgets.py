"""The ``[budgets]`` section: limits on what model calls may cost, per owner, for all
anonymous callers together and for the whole deployment (docs/configuration.md,
``ostinato.spend``). A limit that makes no sense (negative, a hard limit below the soft
one, a currency the price table is not in) is a configuration error."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ostinato.config.sections import Section
from ostinato.spend.limits import CURRENCIES, DEFAULT_OUTPUT_TOKENS, Budgets
from ostinato.spend.rule import Limit


class LimitEntry(Section):
    soft: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Past this, the person is asked before the next step (a card).",
    )
    hard: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Past this, no call is made: the turn ends `spend_limit`.",
    )
    period: Literal["day", "month"] = Field(
        default="day", description="Over a UTC `day` or a UTC calendar `month`."
    )

    @model_validator(mode="after")
    def _ordered(self) -> LimitEntry:
        if self.soft is not None and self.hard is not None and self.hard < self.soft:
            raise ValueError(
                f"the hard limit ({self.hard:g}) is below the soft one ({self.soft:g})"
            )
        return self

    def limit(self) -> Limit:
        return Limit(self.soft, self.hard, self.period)


class BudgetsSection(Section):
    currency: str = Field(
        default="USD",
        description="The currency of the amounts: the price table's (`observability.prices`), "
        "US dollars.",
    )
    default: LimitEntry | None = Field(
        default=None, description="Each owner's limit, unless `owners` names them."
    )
    owners: dict[str, LimitEntry] = Field(
        default_factory=dict, description="Limits of named owners, over `default`."
    )
    anonymous: LimitEntry | None = Field(
        default=None, description="The limit all anonymous callers share."
    )
    deployment: LimitEntry | None = Field(
        default=None, description="The limit of every call of the deployment together."
    )
    unpriced: Literal["allow", "refuse"] = Field(
        default="allow",
        description="A call to a model with no price: made and counted at no known cost "
        "(`allow`), or, when a limit applies, not made (`refuse`).",
    )
    output_tokens: int = Field(
        default=DEFAULT_OUTPUT_TOKENS,
        ge=1,
        description="A call's output is estimated at its `max_tokens`, or at this when it "
        "sets none.",
    )

    @field_validator("currency")
    @classmethod
    def _currency(cls, currency: str) -> str:
        if currency not in CURRENCIES:
            known = ", ".join(CURRENCIES)
            raise ValueError(f"unknown currency {currency!r} (the price table's: {known})")
        return currency

    def budgets(self) -> Budgets:
        """The limits as ``ostinato.spend`` takes them."""
        return Budgets(
            default=self.default.limit() if self.default else None,
            anonymous=self.anonymous.limit() if self.anonymous else None,
            deployment=self.deployment.limit() if self.deployment else None,
            owners={owner: entry.limit() for owner, entry in self.owners.items()},
            unpriced=self.unpriced,
            output_tokens=self.output_tokens,
            currency=self.currency,
        )
