"""CLI flags generated from config dataclasses, so a field, its flag and its help never drift.

A field declares its help in metadata; ``--flag`` is the field name with dashes::

    @dataclass(frozen=True)
    class LstsqConfig:
        n: int = field(default=100_000, metadata={"help": "rows of the synthetic data"})

    add_flags(parser.add_argument_group("lstsq"), LstsqConfig)
    cfg = from_flags(LstsqConfig, parser.parse_args())   # only flags the user gave override defaults

Every help shows a flag's default once: ``add_flags`` writes it into the help (argparse's own
default stays None, so that only flags the user gave count), and :class:`HelpFormatter` adds it
for hand-written parsers (``gorila bench``).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gorila.errors import ConfigError

T = TypeVar("T")


def _base_type(hint: Any) -> tuple[Any, bool]:
    """(the non-None type, whether None is allowed) of a type hint."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return hint, False


def _parser_for(hint: Any):
    base, _ = _base_type(hint)
    if typing.get_origin(base) is tuple:
        return _comma_list(typing.get_args(base)[0])
    if base is Path:
        return _path
    if hasattr(base, "parse"):  # a value object with a spelling of its own (TargetUpdate: "hard:200")
        return _reported(base.parse)
    return base


def _comma_list(item: type) -> Callable[[str], tuple]:
    """A tuple flag's parser (``--hidden 64,64``), whose error says what it expects."""
    def parse(text: str) -> tuple:
        try:
            return tuple(item(part) for part in text.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects comma-separated {item.__name__} values such as "
                                             f"{'64,64' if item is int else '0.1,0.2'}, got {text!r}") from None
    return parse


def _path(text: str) -> Path:
    """A path flag's value; an empty one is refused (``Path("")`` would quietly mean ``.``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a path, got an empty one")
    return Path(text)


def _reported(parse):
    """``parse`` whose ConfigError argparse reports as the flag's own error message."""
    def run(text: str):
        try:
            return parse(text)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(err.message) from None
    return run


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: X)`` to a flag's help unless the help already speaks of its default or
    there is none to show (``None``, a switch). Descriptions keep their own line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or "default" in text or action.default is None
                or action.default is argparse.SUPPRESS or isinstance(action.default, bool)):
            return text
        return f"{text} (default: %(default)s)".strip()


def add_flags(group: argparse._ActionsContainer, cls: type, *, skip: tuple[str, ...] = ()) -> None:
    """One ``--flag`` per field of ``cls`` that has a ``help`` in its metadata; the help ends with
    the field's default unless it explains it itself (a ``None`` default must be explained there)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or "help" not in f.metadata:
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        help_text = f.metadata["help"]
        if "default" not in help_text and default is not None:  # a help that explains its default says it
            help_text += f" (default: {shown})"
        base, _ = _base_type(hints[f.name])
        if base is bool:
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None,
                               help=help_text)
            continue
        kwargs: dict[str, Any] = dict(dest=f.name, default=None, type=_parser_for(hints[f.name]), help=help_text)
        if "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
        if "metavar" in f.metadata:
            kwargs["metavar"] = f.metadata["metavar"]
        group.add_argument(flag, **kwargs)


def from_flags(cls: type[T], namespace: argparse.Namespace, **overrides: Any) -> T:
    """An instance of ``cls`` from the flags the user gave (the rest keep their defaults)."""
    values = {f.name: getattr(namespace, f.name) for f in dataclasses.fields(cls)
              if getattr(namespace, f.name, None) is not None}
    values.update(overrides)
    return cls(**values)


def parse_value(classes: list[type], name: str, text: str) -> Any:
    """``text`` read as the flag of field ``name`` (of one of ``classes``) reads it, e.g. from a
    config file; raises ValueError (or argparse's ArgumentTypeError) as the flag would refuse it."""
    for cls in classes:
        hints = typing.get_type_hints(cls)
        if name in hints:
            base, _ = _base_type(hints[name])
            if base is bool:  # bool("false") is True
                if text.lower() not in ("true", "false"):
                    raise ValueError(f"expected true or false, got {text!r}")
                return text.lower() == "true"
            return text if base is str else _parser_for(hints[name])(text)
    raise ValueError(f"{name} is no field of {', '.join(c.__name__ for c in classes)}")


def count_list(text: str) -> list[int]:
    """An argparse type for flags such as ``--workers 1,2,4``: counts >= 1, comma-separated."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"a comma-separated list of counts >= 1, got {text!r}")
    return counts
