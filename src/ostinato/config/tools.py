"""The ``[tools]`` section: switches, the fetch allow-list, OpenAPI documents and MCP
servers to mount, and ``[tools.sandbox]``: what one run of a forged tool may use."""

from __future__ import annotations

from pydantic import Field, SecretStr

from ostinato.config.sections import RiskName, Seconds, Section, Words, short_env


class OpenApiSource(Section):
    name: str = Field(description="The source's name, and its tools' prefix.")
    url: str = Field(description="The document: a file path or an http(s) URL.")
    base_url: str | None = Field(
        default=None, description="Where calls go; unset: the document's first server."
    )
    auth: dict[str, str] | None = Field(
        default=None,
        description='`{type = "bearer", token_env}`, `{type = "api_key", name, '
        'value_env, location}` or `{type = "basic", username, password_env}`.',
    )
    prefix: str | None = Field(default=None, description="The tools' prefix; unset: `name`.")


class McpSource(Section):
    name: str = Field(description="The server's name, and its tools' prefix.")
    command: str | None = Field(default=None, description="A stdio server's program.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Variables it gets besides a minimal environment."
    )
    cwd: str | None = Field(default=None, description="Its working directory.")
    url: str | None = Field(default=None, description="A streamable-HTTP server's URL.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers it gets.")
    risk: RiskName | None = Field(
        default=None,
        description="The risk of all its tools; unset: from the server's annotations "
        "(read-only: `network`, else `write`).",
    )
    timeout: Seconds = Field(default=60.0, description="Seconds one call may take.")
    per_user: bool = Field(default=False, description="A session and a listing per user.")


class SandboxSection(Section):
    """What one run of a forged tool may use (see tools.md, Sandbox limits)."""

    cpu_s: Seconds = Field(
        default=2.0, description="CPU seconds of the code itself; past them it is interrupted."
    )
    wall_s: Seconds = Field(
        default=20.0,
        description="Seconds the whole run may take, its fetches included; past them "
        "its worker process is killed.",
    )
    memory_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024 * 1024,
        description="Bytes the engine may allocate (every object and buffer counted).",
    )
    stack_bytes: int = Field(
        default=512 * 1024,
        ge=64 * 1024,
        description="Bytes of the engine's stack: deeper recursion is a `RangeError`.",
    )
    output_bytes: int = Field(
        default=256 * 1024, ge=1024, description="Bytes of the result's JSON, at most."
    )
    fetches: int = Field(default=10, ge=0, description="Requests one run may make.")
    fetch_max_bytes: int = Field(
        default=1_000_000, ge=1024, description="Bytes of one response's body, at most."
    )
    fetch_timeout_s: Seconds = Field(default=20.0, description="Seconds one request may take.")
    workers: int = Field(
        default=2, ge=1, le=64, description="Forged-tool runs at once (one process each)."
    )
    per_owner: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Runs of one owner at once; the workers are shared fairly past it.",
    )
    runs_per_minute: int = Field(
        default=60, ge=0, description="Runs of one owner's tools in any 60 s; 0: no bound."
    )


class ToolsSection(Section):
    disabled: list[str] = Field(
        default_factory=list, description="Tools switched off for everyone."
    )
    protected: list[str] = Field(
        default_factory=lambda: ["ask_user", "read_attachment"],
        description="Tools a user can never switch off.",
    )
    fetch_allow_hosts: Words = Field(
        default_factory=list,
        description="Hosts `http_fetch` may read (`docs.example.com`, `*.example.com`); "
        "empty: every public host.",
        json_schema_extra=short_env("OSTINATO_FETCH_ALLOW_HOSTS"),
    )
    openapi: list[OpenApiSource] = Field(
        default_factory=list, description="OpenAPI documents: one tool per operation."
    )
    mcp: list[McpSource] = Field(default_factory=list, description="MCP servers.")
    personal_mcp: bool = Field(
        default=True,
        description="People may connect their own streamable-HTTP MCP servers "
        "(`/v1/mcp-servers`); their tools are theirs alone.",
    )
    mcp_secret_key: SecretStr | None = Field(
        default=None,
        description="The Fernet key people's MCP credentials are encrypted with at rest "
        "(`Fernet.generate_key()`); unset: a server with credentials is refused.",
    )
    mcp_allow_private: bool = Field(
        default=False,
        description="Let people's MCP servers be on loopback, private or link-local "
        "addresses (refused by default, as `http_fetch` refuses them).",
    )
    sandbox: SandboxSection = Field(
        default_factory=SandboxSection, description="Forged tools' limits."
    )
