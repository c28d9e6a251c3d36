"""Whether a `STREAMCRAWL_*` environment name is a setting some service reads.

Each role's settings model (a `streamcrawl.settings.Settings` subclass in its `service` or
`settings` module) is walked field by field along the `__`-separated name. A role whose model is
not built on this branch falls back to the kernel's `Settings`, and names under its own section
(`STREAMCRAWL_<ROLE>__...`) are reported as unchecked rather than wrong.
"""

from __future__ import annotations

import importlib
import inspect
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from streamcrawl.settings import Settings
from streamcrawl.stack import ROLES

PREFIX = "STREAMCRAWL_"


def settings_model(role: str) -> type[Settings] | None:
    """The role's own Settings subclass, or None when its service has none yet."""
    for module_name in (f"{role}.service", f"{role}.settings"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, Settings) and value is not Settings and role in value.model_fields:
                return value
    return None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, UnionType):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return []


def names_a_field(model: type[BaseModel], env_name: str) -> bool:
    if not env_name.startswith(PREFIX):
        return False
    parts = env_name.removeprefix(PREFIX).lower().split("__")
    current: list[type[BaseModel]] = [model]
    for index, part in enumerate(parts):
        fields = [m.model_fields[part] for m in current if part in m.model_fields]
        if not fields:
            return False
        if index == len(parts) - 1:
            return True
        current = [m for field in fields for m in _models_in(field.annotation)]
        if not current:
            return False
    return True


def check(role: str | None, env_name: str) -> str | None:
    """None when `env_name` is a setting of `role` (any role when None); else why it is not.

    Returns "unchecked: ..." for a name in the section of a role whose settings are not built.
    """
    roles = ROLES if role is None else (role,)
    for candidate in roles:
        model = settings_model(candidate) or Settings
        if names_a_field(model, env_name):
            return None
    section = env_name.removeprefix(PREFIX).split("__")[0].lower()
    if section in ROLES and settings_model(section) is None:
        return f"unchecked: {env_name} ({section} settings not built on this branch)"
    return f"{env_name} is no setting of {role or 'any role'}"
