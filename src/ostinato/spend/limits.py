"""The budgets a deployment sets, and the accounts a call of one owner is charged to.
Pure: built from the ``[budgets]`` settings where the deployment is made.

Every call is charged to the owner's own account (``owners``' entry for them, else
``default``), to the account all anonymous callers share when the owner is anonymous,
and to the deployment's; an account with no limit is charged all the same, so a limit
set later (a reload) starts from what was spent. An owner of ``None`` (a conversation
made by the library without one) is charged as the owner ``""``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ostinato.identity.owners import is_anonymous
from ostinato.spend.rule import Account, Limit, Unpriced

CURRENCIES = ("USD",)  # the price table's (``observe.prices``)
DEFAULT_OUTPUT_TOKENS = 4_096  # a call that names no max_tokens is estimated at this


@dataclass(frozen=True, slots=True)
class Budgets:
    default: Limit | None = None  # each owner's, unless ``owners`` names them
    anonymous: Limit | None = None  # every anonymous caller's together
    deployment: Limit | None = None  # everyone's together
    owners: Mapping[str, Limit] = field(default_factory=dict)
    unpriced: Unpriced = "allow"
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    currency: str = "USD"

    @property
    def any(self) -> bool:
        """Whether any limit is set (else no call is ever checked, only counted)."""
        limits = (self.default, self.anonymous, self.deployment, *self.owners.values())
        return any(limit is not None and limit.bounds for limit in limits)

    def own_limit(self, owner: str | None) -> Limit:
        found = self.owners.get(owner or "")
        return found or self.default or Limit()

    def accounts(self, owner: str | None) -> tuple[Account, ...]:
        """The accounts a call of ``owner`` is charged to, in the rule's order."""
        who = owner or ""
        own = Account("owner", who, self.own_limit(owner))
        everyone = Account("deployment", "", self.deployment or Limit())
        if is_anonymous(owner):
            return own, Account("anonymous", "", self.anonymous or Limit()), everyone
        return own, everyone


NO_BUDGETS = Budgets()
