"""The ``[tools]`` section: switches, the fetch allow-list, OpenAPI documents and MCP
servers to mount."""

from __future__ import annotations

from pydantic import Field

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
