"""Reading the configuration: the layers that ``config.settings`` lists (flags, the
environment, older short variables, the file, the defaults) merged, validated once into a
``Config``, and checked across settings (``config.checks``), every problem said at once.

Kept apart from ``config.settings`` (the model) so that the checks, which read a ``Config``,
and the reading, which runs them, import the model without importing each other.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsError,
    TomlConfigSettingsSource,
)

from ostinato.config.checks import cross_checks
from ostinato.config.settings import (
    CONFIG_ENV,
    DEFAULT_PATH,
    ENV_PREFIX,
    NESTED,
    Config,
    ConfigError,
)

# --- the layers -----------------------------------------------------------------------------


class _Environment(EnvSettingsSource):
    """``OSTINATO_<SECTION>__<FIELD>`` from a given mapping (not always ``os.environ``)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._given = env
        super().__init__(Config)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in self._given.items() if v != ""}


class _ShortNames(PydanticBaseSettingsSource):
    """The older short variables: each field's ``short_env`` / ``short_env_prefix``."""

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(Config)
        self._env = {k.upper(): v for k, v in env.items() if v != ""}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every field at once

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for path, name in short_names(Config):
            if name.endswith("_"):
                table = {
                    key[len(name) :].lower(): value
                    for key, value in self._env.items()
                    if key.startswith(name) and len(key) > len(name)
                }
                if table:
                    _put(values, path, table)
            elif name in self._env:
                _put(values, path, self._env[name])
        return values


def short_names(
    model: type[BaseModel], path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], str]]:
    """``(path, variable)`` for every field with a short variable (a prefix ends in ``_``)."""
    found = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        variable = extra.get("env") or extra.get("env_prefix")
        if isinstance(variable, str):
            found.append(((*path, name), variable))
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += short_names(annotation, (*path, name))
    return found


def _put(values: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        values = values.setdefault(key, {})
    values[path[-1]] = value


def _merge(low: dict[str, Any], high: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(low)
    for key, value in high.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# --- loading -------------------------------------------------------------------------------


def config_path(path: str | Path | None, env: Mapping[str, str]) -> Path | None:
    """The file to read: ``path``, else ``$OSTINATO_CONFIG``, else ``./ostinato.toml``
    when it exists, else none."""
    if path:
        return Path(path)
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    return DEFAULT_PATH if DEFAULT_PATH.exists() else None


@dataclass(frozen=True, slots=True)
class Loaded:
    """What ``read_config`` found: the config (built from what is valid when some of it
    is not), where the file came from, every problem, and the merged raw values."""

    config: Config
    source: str
    problems: list[str]
    raw: dict[str, Any]


def read_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Loaded:
    """Merge the layers (see the module docstring), validate, check, and say every problem
    found. ``ConfigError`` only when nothing can be read: the file is missing or is not
    TOML, or a list in the environment is not JSON."""
    env = os.environ if env is None else env
    source_path = config_path(path, env)
    file: dict[str, Any] = {}
    source = "built-in defaults" if source_path is None else str(source_path)
    if source_path is not None:
        file = _read_file(source_path)
    try:
        nested = _Environment(env)()
    except SettingsError as exc:  # a list or table that is not JSON
        raise ConfigError("the environment", [f"{exc}: give it as JSON"]) from None
    layers = _Layers(dict(overrides or {}), nested, _ShortNames(env)(), file)
    layers.variables = {name.upper() for name, value in env.items() if value != ""}
    raw = layers.merged()
    config, errors = _validate(raw)
    problems = [layers.describe(error) for error in errors]
    problems += cross_checks(config, raw)
    return Loaded(config, source, problems, raw)


def load_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[Config, str]:
    """``read_config``, raising ``ConfigError`` with every problem when there is any.
    Returns the config and where the file came from (a path, or "built-in defaults")."""
    loaded = read_config(path, env=env, overrides=overrides)
    if loaded.problems:
        raise ConfigError(loaded.source, loaded.problems)
    return loaded.config, loaded.source


def _read_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(str(path), ["the file does not exist"])
    try:
        return TomlConfigSettingsSource(Config, toml_file=path)()
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), [f"not valid TOML: {exc}"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), [f"cannot be read: {exc}"]) from None


class _Layers:
    """The values from each layer, highest first, to merge and to say where a bad
    value came from."""

    def __init__(
        self,
        flags: dict[str, Any],
        env: dict[str, Any],
        short: dict[str, Any],
        file: dict[str, Any],
    ) -> None:
        self.flags, self.env, self.short, self.file = flags, env, short, file
        self.variables: set[str] = set()
        self._short_names = dict(short_names(Config))

    def merged(self) -> dict[str, Any]:
        return _merge(_merge(_merge(self.file, self.short), self.env), self.flags)

    def describe(self, error: Mapping[str, Any]) -> str:
        loc = tuple(str(part) for part in error["loc"])
        line = f"{where(error['loc'])}: {_message(error)}"
        for depth in range(len(loc), 0, -1):
            prefix = loc[:depth]
            if _has(self.flags, prefix):
                return f"{line} (from the command line)"
            variable = ENV_PREFIX + NESTED.join(prefix).upper()
            if variable in self.variables and _has(self.env, prefix):
                return f"{line} (from {variable})"
            if _has(self.short, prefix):
                name = self._short_names.get(prefix) or self._short_names.get(prefix[:-1], "")
                variable = name + prefix[-1].upper() if name.endswith("_") else name
                return f"{line} (from {variable})"
        return line


def _has(values: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if isinstance(values, dict) and key in values:
            values = values[key]
        elif isinstance(values, list) and key.isdigit() and int(key) < len(values):
            values = values[int(key)]
        else:
            return False
    return True


def where(loc: tuple[Any, ...]) -> str:
    """``("agents", 1, "tier")`` -> ``agents[1].tier``."""
    location = ""
    for part in loc:
        location += f"[{part}]" if isinstance(part, int) else (f".{part}" if location else part)
    return location or "file"


def _message(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown setting (check its spelling and section)"
    return str(error["msg"]).removeprefix("Value error, ")


# --- validating, setting aside what is wrong -------------------------------------------------

_GONE = object()


def _validate(raw: dict[str, Any]) -> tuple[Config, list[Any]]:
    """The config and the schema errors. With errors, the config is built from what is
    left when the wrong values are set aside (their defaults apply; an entry missing a
    required key is left out), so the checks between settings can still run."""
    try:
        return Config.model_validate(raw), []
    except ValidationError as exc:
        first: list[Any] = exc.errors()
    errors, pruned = first, copy.deepcopy(raw)
    for _ in range(8):
        for error in errors:
            _prune(pruned, tuple(error["loc"]), missing=error["type"] == "missing")
        pruned = _sweep(pruned)
        try:
            return Config.model_validate(pruned), first
        except ValidationError as exc:
            errors = exc.errors()
    return Config(), first


def _prune(values: Any, loc: tuple[Any, ...], *, missing: bool) -> None:
    """Set aside the value at ``loc``; for a missing key, the entry that lacks it."""
    path = loc[:-1] if missing else loc
    parents: list[tuple[Any, Any]] = []
    node = values
    for key in path:
        if (isinstance(node, dict) and key in node) or (
            isinstance(node, list) and isinstance(key, int) and key < len(node)
        ):
            parents.append((node, key))
            node = node[key]
        else:
            break
    if parents:
        container, key = parents[-1]
        if isinstance(container, list):
            container[key] = _GONE
        else:
            del container[key]


def _sweep(values: Any) -> Any:
    if isinstance(values, dict):
        return {k: _sweep(v) for k, v in values.items()}
    if isinstance(values, list):
        return [_sweep(v) for v in values if v is not _GONE]
    return values
