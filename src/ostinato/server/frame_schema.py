"""The JSON Schema of a frame, as it goes on the wire, made from ``ostinato.frames``.

Every frame dataclass becomes one object schema (every field is always sent, so every
field is required); the union is a ``oneOf`` with a ``discriminator`` on ``type``. A
``message`` frame's row is the row as ``/messages`` returns it (``MessageOut``), not the
``Message`` dataclass. The OpenAPI document carries it under ``components`` (``Frame``),
and the package ships it as ``ostinato/frames.schema.json`` for front ends that
generate types from it. Regenerate that file after changing a frame::

    python -m ostinato.server.frame_schema

(``tests/server/test_frame_schema.py`` fails while the file is stale.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

import ostinato
from ostinato.frames import Frame
from ostinato.server.schemas import MessageOut

SCHEMA_FILE = Path(ostinato.__file__).with_name("frames.schema.json")
DIALECT = "https://json-schema.org/draft/2020-12/schema"
DESCRIPTION = (
    "A frame: one event of a conversation's stream (the `data:` of a Server-Sent Event, "
    "or one WebSocket text message). `type` says which; every frame has `run_id` and "
    "`seq`. See docs/api.md."
)
_FRAMES: TypeAdapter[Any] = TypeAdapter(Annotated[Frame, Field(discriminator="type")])
_ROW = "MessageOut"  # the wire shape of a stored row


def frame_schemas(ref_template: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``Frame`` union's schema and the definitions it refers to (each frame, and
    ``MessageOut``), with references made by ``ref_template`` (``{model}`` is the name)."""
    schema = _FRAMES.json_schema(mode="serialization", ref_template=ref_template)
    definitions: dict[str, Any] = schema.pop("$defs")
    row_ref = ref_template.format(model=_ROW)
    for name in list(definitions):
        definition = definitions[name]
        properties = definition.get("properties", {})
        if "run_id" not in properties:  # Message and its blocks: not a frame
            del definitions[name]
            continue
        definition["required"] = list(properties)  # to_json sends every field
        if "message" in properties:
            properties["message"] = {"$ref": row_ref, "description": "The row, as stored."}
    definitions[_ROW] = MessageOut.model_json_schema(ref_template=ref_template)
    return {"description": DESCRIPTION, **schema}, definitions


def document() -> dict[str, Any]:
    """The standalone JSON Schema of a frame (what ``frames.schema.json`` holds)."""
    union, definitions = frame_schemas("#/$defs/{model}")
    return {"$schema": DIALECT, "title": "Frame", **union, "$defs": definitions}


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    SCHEMA_FILE.write_text(render(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
