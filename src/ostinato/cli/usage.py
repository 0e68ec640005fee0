"""``ostinato usage``: what your model calls used and cost, from a running server.

::

    ostinato usage [--url URL] [--key KEY] [--since YYYY-MM-DD] [--until YYYY-MM-DD]
                   [--all] [--json]

It reads ``GET /v1/usage`` (``--all``: ``GET /v1/admin/usage``, every owner's, for an
admin) and prints it by day, model and agent, with the budget as it stands. A cost that
includes calls to a model with no price is printed ``unknown``, never as zero.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import httpx

CLIENT_HELP = "(default: client.url, $OSTINATO_URL, else http://127.0.0.1:8000)"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    usage = commands.add_parser(
        "usage", help="what your model calls used and cost, by day, model and agent"
    )
    usage.add_argument("--url", help=f"the server {CLIENT_HELP}")
    usage.add_argument("--key", help="an API key (default: client.key, $OSTINATO_KEY)")
    usage.add_argument("--since", metavar="DAY", help="the first UTC day (default: the 1st)")
    usage.add_argument("--until", metavar="DAY", help="the last UTC day (default: today)")
    usage.add_argument("--all", action="store_true", help="every owner's (an admin's view)")
    usage.add_argument("--json", action="store_true", help="print the server's answer as JSON")


def run(
    args: argparse.Namespace, out: TextIO | None = None, http: httpx.Client | None = None
) -> int:
    """The command; ``http``: a client for the server (default: one for ``--url``)."""
    import httpx

    from ostinato.config import ConfigError, load_config

    out = out or sys.stdout
    given = {k: getattr(args, k) for k in ("url", "key") if getattr(args, k) is not None}
    try:
        config = load_config(None, overrides={"client": given} if given else None)[0]
    except ConfigError as exc:
        print(f"ostinato usage: {exc}", file=sys.stderr)
        return 2
    key = config.client.key.get_secret_value() if config.client.key else None
    headers = {"authorization": f"Bearer {key}"} if key else {}
    params = {k: v for k in ("since", "until") if (v := getattr(args, k))}
    path = "/v1/admin/usage" if args.all else "/v1/usage"
    client = http or httpx.Client(base_url=config.client.url)
    try:
        answer = client.get(path, params=params, headers=headers)
    except httpx.HTTPError as exc:
        print(f"ostinato usage: cannot reach {config.client.url}: {exc}", file=sys.stderr)
        return 1
    finally:
        if http is None:
            client.close()
    json_body = answer.headers.get("content-type", "").startswith("application/json")
    body = answer.json() if json_body else {}
    if answer.status_code != 200:
        message = body.get("error", {}).get("message") or answer.text
        print(f"ostinato usage: {answer.status_code}: {message}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(body, indent=2), file=out)
    elif args.all:
        print_all(body, out)
    else:
        print_own(body, out)
    return 0


def cost(count: dict[str, Any], currency: str) -> str:
    value = count["cost_usd"]
    if value is None:
        known = count["priced_cost_usd"]
        return f"unknown ({count['unpriced_calls']} unpriced; {money(known, currency)} known)"
    return money(value, currency)


def money(amount: float, currency: str) -> str:
    from ostinato.spend.words import money as said

    return said(amount, currency)


def _table(title: str, key: str, counts: list[dict[str, Any]], currency: str, out: TextIO) -> None:
    print(f"\n{title}", file=out)
    for count in counts:
        name = count[key] if count[key] is not None else "(none)"
        print(
            f"  {name:<32} {count['calls']:>6} calls {count['tokens_in']:>10} in "
            f"{count['tokens_out']:>9} out  {cost(count, currency)}",
            file=out,
        )


def print_own(body: dict[str, Any], out: TextIO) -> None:
    currency = body["currency"]
    total = body["total"]
    print(f"usage of {body['owner']}, {body['since']} to {body['until']} ({currency})", file=out)
    print(
        f"  {total['calls']} calls, {total['tokens_in']} tokens in, {total['tokens_out']} out,"
        f" {cost(total, currency)}",
        file=out,
    )
    _table("by day", "day", body["days"], currency, out)
    _table("by model", "model", body["models"], currency, out)
    _table("by agent", "agent", body["agents"], currency, out)
    for budget in body["budgets"]:
        print_budget(budget, currency, out)


def print_budget(budget: dict[str, Any], currency: str, out: TextIO) -> None:
    span = "today" if budget["period"] == "day" else "this month"
    spent = money(budget["spent_usd"] + budget["reserved_usd"], currency)
    limits = [
        f"{name} {money(budget[f'{name}_usd'], currency)}"
        for name in ("soft", "hard")
        if budget[f"{name}_usd"] is not None
    ]
    who = {"owner": "budget", "anonymous": "guests' budget", "deployment": "deployment budget"}
    print(
        f"\n{who[budget['applies_to']]}: {spent} {span} ({', '.join(limits)}); "
        f"resets {budget['resets_at']}",
        file=out,
    )


def print_all(body: dict[str, Any], out: TextIO) -> None:
    currency = body["currency"]
    print(f"usage of every owner, {body['since']} to {body['until']} ({currency})", file=out)
    print(f"  {body['total']['calls']} calls, {cost(body['total'], currency)}", file=out)
    _table("by owner", "owner", body["owners"], currency, out)
    _table("by model", "model", body["models"], currency, out)
    for budget in body["pools"]:
        print_budget(budget, currency, out)
