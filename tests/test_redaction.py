"""``ostinato.redaction``: known secrets, credentials by context, and key-shaped text go;
the rest of an error (its code, what went wrong) stays."""

from __future__ import annotations

import pytest

from ostinato.redaction import REDACTED, forget_secret, redact, register_secret


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("invalid x-api-key: sk-ant-api03-abcdefghijklmnop", "invalid x-api-key: [redacted]"),
        (
            "Incorrect API key provided: k. See docs",
            "Incorrect API key provided: [redacted] See docs",
        ),
        ("Authorization: Bearer abc.def-123456", "Authorization: Bearer [redacted]"),
        ("Basic dXNlcjpwYXNz refused", "Basic [redacted] refused"),
        (
            "GET https://user:pw@host/v1?api_key=zzz&x=1",
            "GET https://[redacted]@host/v1?api_key=[redacted]&x=1",
        ),
        ("bad key gsk_0123456789abcdefABCD here", "bad key [redacted] here"),
        ("AbCdEfGh12345678AbCdEfGh12345678 is wrong", "[redacted] is wrong"),
        ('{"password": "hunter22"}', '{"password": "[redacted]"}'),
    ],
)
def test_secrets_are_replaced(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "rate_limit_exceeded: Rate limit reached for gpt-4.1-mini on tokens per min (TPM)",
        "token limit exceeded; max_tokens=500",
        "basic information is missing",
        "turn 1a2308bfbe7abe736b0460c6fd0 in chatcmpl-383df56f-f9f8-4b25-a564-7ad729d86667",
        "messages.2.content: Input should be a valid string",
    ],
)
def test_ordinary_error_text_is_kept(text: str) -> None:
    assert redact(text) == text


def test_registered_and_passed_secrets() -> None:
    register_secret("deploy-secret-123")
    register_secret("short")  # too short to register: it would ruin the text
    try:
        assert redact("sent deploy-secret-123 and short") == f"sent {REDACTED} and short"
        assert redact("caller mykey-9876543", ("mykey-9876543", None)) == f"caller {REDACTED}"
    finally:
        forget_secret("deploy-secret-123")
    assert redact("sent deploy-secret-123") == "sent deploy-secret-123"
