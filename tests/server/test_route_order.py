"""The routers are included in the order of how often they are asked (``app.py``): that
order can change no answer only if no request could be taken by two routes. For every
operation of the OpenAPI document, a path made from its template (each parameter a
plain word) is matched, with its method, by that operation's template alone."""

from __future__ import annotations

import re

from starlette.routing import compile_path

from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore

METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


def test_no_request_is_taken_by_two_routes() -> None:
    runtime = Runtime(MemoryStore(), model=ScriptedModel(), seed_recall=False)
    app = create_app(runtime, model_name="scripted", store_name="memory://")
    operations = [
        (method, template)
        for template, item in app.openapi()["paths"].items()
        for method in item
        if method in METHODS
    ]
    assert len(operations) > 100
    patterns = [(m, t, compile_path(t)[0]) for m, t in operations]
    for method, template in operations:
        path = re.sub(r"\{[^}]+\}", "word", template)
        taken = [t for m, t, regex in patterns if m == method and regex.match(path)]
        assert taken == [template], f"{method.upper()} {path}: {taken}"
