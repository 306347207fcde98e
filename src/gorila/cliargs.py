"""CLI flags generated from config dataclasses, so a field, its flag and its help never drift.

A field declares its help in metadata; ``--flag`` is the field name with dashes::

    @dataclass(frozen=True)
    class LstsqConfig:
        n: int = field(default=100_000, metadata={"help": "rows of the synthetic data"})

    add_flags(parser.add_argument_group("lstsq"), LstsqConfig)
    cfg = from_flags(LstsqConfig, parser.parse_args())   # only flags the user gave override defaults

Every help shows a flag's default once, with its real value: ``add_flags`` writes it into the
help (argparse's own default stays None, so that only flags the user gave count; a default that
depends on the algorithm is passed in ``defaults``; a ``None`` default is explained in its help as
``(default: ...)``), and :class:`HelpFormatter`, which every parser of :func:`command_parser` uses,
adds it for hand-written flags (``gorila bench``, ``gorila simulate``). A renamed field records its
old names (``metadata={"was": ("envs_per_worker",)}``): an old flag or setting is refused with the
new name, and a run directory's ``config.json`` written under the old one resumes as it was.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gorila.errors import ConfigError
from gorila.validate import excerpt

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
D = TypeVar("D", bound="DataclassInstance")


def _base_type(hint: Any) -> tuple[Any, bool]:
    """(the non-None type, whether None is allowed) of a type hint."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return hint, False


def _parser_for(hint: Any) -> Callable[[str], Any]:
    base, _ = _base_type(hint)
    if typing.get_origin(base) is tuple:
        return _comma_list(typing.get_args(base)[0])
    if base is Path:
        return _path
    if hasattr(base, "parse"):  # a value object with a spelling of its own (TargetUpdate: "hard:200")
        return _reported(base.parse)
    return _integer if base is int else base


#: The most digits an integer setting is read with: more than any setting's range (int64's 19).
_INT_DIGITS = 30


def _integer(text: str) -> int:
    """An integer flag's value; text of more than :data:`_INT_DIGITS` characters is refused unread
    (Python's ``int`` takes quadratic time on long text) and the error shows only its start."""
    if len(text.strip()) > _INT_DIGITS:
        raise argparse.ArgumentTypeError(f"expects an integer, got {len(text):,} characters: {excerpt(text)}")
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects an integer, got {excerpt(text)}") from None


def _comma_list(item: type) -> Callable[[str], tuple]:
    """A tuple flag's parser (``--hidden 64,64``), whose error says what it expects."""
    def parse(text: str) -> tuple:
        try:
            return tuple((_integer if item is int else item)(part) for part in text.split(",") if part.strip())
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(f"expects comma-separated {item.__name__} values such as "
                                             f"{'64,64' if item is int else '0.1,0.2'}, got {excerpt(text)}") from None
    return parse


def _path(text: str) -> Path:
    """A path flag's value; an empty one is refused (``Path("")`` would quietly mean ``.``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a path, got an empty one")
    return Path(text)


def _reported(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` whose ConfigError argparse reports as the flag's own error message."""
    def run(text: str) -> T:
        try:
            return parse(text)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(err.message) from None
    return run


def command_parser(prog: str, description: str | None = None, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of a gorila command: abbreviated flags refused, :class:`HelpFormatter`'s help::

        parser = command_parser("gorila bench ps", __doc__)
        parser.add_argument("--rounds", type=int, default=50, help="measured round trips")
    """
    return argparse.ArgumentParser(prog=prog, description=description, formatter_class=HelpFormatter,
                                   allow_abbrev=False, **kwargs)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """gorila's one help style: ``(default: X)`` once after a flag's help unless the help explains
    its default itself or there is none to show (``None``, a switch); a tuple or list default as
    the comma-separated text the flag takes; descriptions keep their own line breaks and lose the
    reST markup of the docstrings they come from (````gorila simulate````, ``::``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or "default" in text or action.default is None
                or action.default is argparse.SUPPRESS or isinstance(action.default, bool)):
            return text
        return f"{text} (default: {shown_default(action.default).replace('%', '%%')})".strip()

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return super()._fill_text(_plain(text), width, indent)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return super()._split_lines(_plain(text), width)


def _plain(text: str) -> str:
    """Docstring text as a terminal shows it: ````x````, ```x``` and a role's ``:mod:`x``` as x, a
    literal block's ``::`` as ``:``."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return re.sub(r"::$", ":", re.sub(r"`{1,2}([^`]+)`{1,2}", r"\1", text), flags=re.MULTILINE)


def shown_default(value: Any) -> str:
    """A default as a user would type it: ``(64, 64)`` as ``64,64``, ``True`` as ``true``."""
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def add_flags(group: argparse._ActionsContainer, cls: type, *, skip: tuple[str, ...] = (),
              defaults: Mapping[str, Any] | None = None) -> None:
    """One ``--flag`` per field of ``cls`` that has a ``help`` in its metadata. The help ends with
    ``(default: X)``: the field's default, or the one ``defaults`` gives where the algorithm decides
    it (the server's optimizer); a ``None`` default (nothing set) is explained by the help's own
    ``(default: ...)`` words or not at all, and a help that speaks of its default while there is a
    value to show is refused."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or "help" not in f.metadata:
            continue
        flag = "--" + f.name.replace("_", "-")
        default = (defaults or {}).get(f.name, _field_default(f))
        help_text = f.metadata["help"]
        if default is not None:
            if "default" in help_text:  # it would hide the real value behind words
                raise ValueError(f"{cls.__name__}.{f.name}: its help speaks of a default; it is {default!r}")
            help_text += f" (default: {shown_default(default)})"
        base, _ = _base_type(hints[f.name])
        if base is bool:
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None,
                               help=help_text)
            continue
        kwargs: dict[str, Any] = dict(dest=f.name, default=None, type=_parser_for(hints[f.name]))
        if "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
        if "metavar" in f.metadata:
            kwargs["metavar"] = f.metadata["metavar"]
        group.add_argument(flag, help=help_text, **kwargs)


def _field_default(f: dataclasses.Field[Any]) -> Any:
    """A field's default, its factory's where it has one (every field with a flag has a default)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    assert f.default_factory is not dataclasses.MISSING, f"{f.name} has no default"
    return f.default_factory()


def renamed(classes: list[type]) -> dict[str, str]:
    """Old setting names of ``classes``' fields -> their current names (``metadata["was"]``): what a
    run directory's ``config.json`` written before a rename holds, and what an old flag is told."""
    return {old: f.name for cls in classes for f in dataclasses.fields(cls) for old in f.metadata.get("was", ())}


def from_flags(cls: type[D], namespace: argparse.Namespace, **overrides: Any) -> D:
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


#: What a setting of each plain type may be given as, and how an error names it.
_KINDS: dict[Any, tuple[tuple[type, ...], str]] = {
    str: ((str,), "a string"), int: ((int,), "an integer"), float: ((int, float), "a number"),
    bool: ((bool,), "true or false"), Path: ((str, os.PathLike), "a path"),
}

# How a value's type is named to someone who wrote it in YAML or JSON.
_TYPE_WORDS = {"tuple": "a list", "list": "a list", "dict": "a mapping", "NoneType": "null", "int": "the integer",
               "float": "the number", "str": "the string", "bool": ""}


def check_types(classes: list[type], values: Mapping[str, Any]) -> None:
    """Raise a :class:`ConfigError` naming the first of ``values`` (field name -> value, of one of
    ``classes``) whose value is not of its field's type: before any value is used, so that ``env:
    5`` or ``algo: [dqn]`` in a config file is refused by name rather than failing where it is
    first read. A tuple field takes a list too (JSON has no tuples), a field with a spelling of its
    own (``target_update``) its text; the ranges are the dataclasses' to check."""
    hints: dict[str, Any] = {}
    for cls in classes:
        hints.update(typing.get_type_hints(cls))
    for name, value in values.items():
        if name not in hints:
            continue
        base, optional = _base_type(hints[name])
        if value is None and optional:
            continue
        allowed: tuple[type, ...]
        if typing.get_origin(base) is tuple:
            allowed, kind = (tuple, list), "a list"
        elif base in _KINDS:
            allowed, kind = _KINDS[base]
        elif hasattr(base, "parse"):
            allowed, kind = (str, base), f"{base.__name__} text"
        else:
            continue
        if isinstance(value, bool) and bool not in allowed or not isinstance(value, allowed):
            what = _TYPE_WORDS.get(type(value).__name__, type(value).__name__)
            raise ConfigError(name, f"must be {kind}, got {what + ' ' if what else ''}{excerpt(value)}")


def count_list(text: str) -> list[int]:
    """An argparse type for flags such as ``--workers 1,2,4``: counts >= 1, comma-separated."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"a comma-separated list of counts >= 1, got {text!r}")
    return counts
