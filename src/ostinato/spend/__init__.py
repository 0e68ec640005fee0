"""Spend: what model calls cost, checked against budgets before each call and counted
per owner after it.

- ``spend.rule``: the verdict on one call (pure): allow, ask (past a soft limit) or
  refuse (past a hard one), and the periods budgets run over;
- ``spend.limits``: the budgets a deployment sets, and the accounts a call is charged to;
- ``spend.words``: what a person is told (the soft-limit card, the closing sentence);
- ``spend.gate``: the effects: estimate, reserve in the store, charge after;
- ``spend.seam``: where a side call (``models.assembly.complete``) finds the gate.

The store keeps the spend (``store.spend``); a turn's own calls meet the gate in
``loop.spending``. Nothing is imported here: the modules are loaded where used.
"""
