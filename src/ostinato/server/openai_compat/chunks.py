"""One streamed completion: each frame of its turn as the bytes of its chunk events.

``Chunks.first()`` is the opening chunk (the ``assistant`` role); ``Chunks.frame(frame)``
the events a frame adds (``translate.Reply`` says what, ``wire.Envelope`` how), and
whether the completion has ended (after ``finish_reason`` or an error, then
``data: [DONE]``). Pure: frames in, bytes out, so ``bench/completions.py`` times exactly
what the route runs for each chunk.
"""

from __future__ import annotations

from ostinato.frames import Frame
from ostinato.server.openai_compat.translate import Content, Failed, Finish, Reasoning, Reply
from ostinato.server.openai_compat.wire import DONE, Envelope, sse


class Chunks:
    def __init__(self, reply: Reply, envelope: Envelope) -> None:
        self.reply = reply
        self.envelope = envelope

    def first(self) -> bytes:
        return sse(self.envelope.chunk({"role": "assistant", "content": ""}))

    def frame(self, frame: Frame) -> tuple[bytes, bool]:
        """The events ``frame`` adds, and whether the completion ended with them."""
        envelope = self.envelope
        pieces = self.reply.see(frame)
        if len(pieces) == 1 and type(pieces[0]) is Content:  # most frames: a text delta
            return envelope.delta_event("content", pieces[0].text), False
        out: list[bytes] = []
        for piece in pieces:
            match piece:
                case Content(text=text):
                    out.append(envelope.delta_event("content", text))
                case Reasoning(text=text):
                    out.append(envelope.delta_event("reasoning_content", text))
                case Finish(reason=reason, usage=usage):
                    out.append(sse(envelope.chunk({}, reason)))
                    if envelope.include_usage:
                        out.append(sse(envelope.usage_chunk(usage)))
                    out.append(DONE)
                    return b"".join(out), True
                case Failed(code=code, message=message):
                    error = {"message": message, "type": "server_error", "code": code}
                    out.append(sse({"error": error}))
                    out.append(DONE)
                    return b"".join(out), True
        return b"".join(out), False
