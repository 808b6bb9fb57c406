"""What every patch of transformers' internals shares: the patch record, its error, and the check helpers."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

CHECKED = "transformers 5.24.0 with torch 2.13.0"  # the versions every check here was written and run against


class InternalsChanged(RuntimeError):
    """The installed transformers lacks an internal a patch relies on."""


@dataclass(frozen=True)
class Patch:
    name: str  # the function that patches
    relies_on: str  # the internals it reads or replaces


def require(patch: Patch, ok: bool, missing: str) -> None:
    if not ok:
        import transformers

        raise InternalsChanged(
            f"{patch.name} relies on {missing}, which the installed transformers {transformers.__version__} "
            f"lacks (checked against {CHECKED}; it relies on {patch.relies_on}). Install the transformers of "
            "pyproject.toml, or adapt pipeline/backend/hf_internals/ to this version."
        )


def parameter_names(function) -> list[str]:
    """A function's parameter names after ``self`` (through decorators that keep ``__wrapped__``)."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []
    return names[1:] if names[:1] == ["self"] else names
