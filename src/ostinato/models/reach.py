"""Whether the configured model server (``OSTINATO_BASE_URL``) answers, as ``/healthz``
reports it: its model list asked at most once every few seconds, the answer kept."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ostinato.models.choice import first_listed_model

TTL_S = 5.0  # an answer is kept this long
WAIT_S = 2.0  # how long one look waits for the server


@dataclass(slots=True)
class ServerReach:
    """The configured server at ``url``: ``look`` says whether it answers (kept
    ``TTL_S``), and why not."""

    url: str
    api_key: str
    answered: bool | None = None  # None: not looked at yet
    _at: float = field(default=-TTL_S)

    async def look(self) -> tuple[bool, str | None]:
        now = time.monotonic()
        if self.answered is None or now - self._at >= TTL_S:
            self._at = now
            self.answered = await first_listed_model(self.url, self.api_key, WAIT_S) is not None
        if self.answered:
            return True, None
        return False, f"the model server at {self.url} did not answer in {WAIT_S:g} s"
