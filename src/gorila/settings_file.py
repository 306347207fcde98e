"""Reading settings from a file: ``gorila train --config FILE`` (YAML or JSON) and a run's own
``config.json`` (``--resume``, ``gorila eval``), with what a file may cost bounded before and while
it is parsed::

    data = read_settings(Path("a3c.yaml"), "config")                   # a mapping, or ConfigError("config")
    data = read_settings(run_dir / "config.json", "resume", inside=run_dir)   # never through a link

A file is refused, by a :class:`~gorila.errors.ConfigError` naming ``field`` and the file, when it
is larger than :data:`MAX_FILE_BYTES`, not UTF-8, nested deeper than :data:`MAX_DEPTH`, holds more
than :data:`MAX_NODES` values or a value longer than :data:`MAX_SCALAR_CHARS` characters, or (YAML)
uses anchors and aliases: a few hundred bytes of aliases expand to billions of values, which every
later step (checks, error messages) would walk. Nothing of a refused file is used.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gorila.errors import ConfigError
from gorila.validate import clipped

#: The largest settings file: a run's config.json is a few kilobytes.
MAX_FILE_BYTES = 256 * 1024
#: The deepest nesting: a run's config.json nests three deep.
MAX_DEPTH = 16
#: The most values (scalars, lists and mappings) in a file.
MAX_NODES = 10_000
#: The longest value, as written: an env id or a path; an integer of more digits than this is none.
MAX_SCALAR_CHARS = 1_000


def read_settings(path: Path, field: str, *, inside: Path | None = None) -> Any:
    """The data of the settings file ``path`` (JSON for ``.json``, else YAML), within the bounds
    above. With ``inside`` (a run directory) the file is opened without following a symbolic link,
    so that a link planted in a run directory never reads a file out of it."""
    path = Path(path)
    text = _read_text(path, field, follow=inside is None)
    if path.suffix == ".json":
        return _json(text, path, field)
    return _yaml(text, path, field)


def _read_text(path: Path, field: str, *, follow: bool) -> str:
    flags = os.O_RDONLY | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if not follow and os.path.islink(path):
            raise ConfigError(field, f"{path} is a symbolic link: gorila reads a run directory's files only "
                                     "from the directory itself") from None
        raise ConfigError(field, f"{path} cannot be read: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_FILE_BYTES + 1)
        except OSError as err:  # a directory, say
            raise ConfigError(field, f"{path} cannot be read: {err.strerror or err}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(field, f"{path} is larger than {MAX_FILE_BYTES // 1024} KiB: not a settings file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(field, f"{path} is not UTF-8 text (byte {err.start:,}): it was damaged, or is "
                                 "not a settings file") from None


def _json(text: str, path: Path, field: str) -> Any:
    def bounded_int(digits: str) -> int:
        if len(digits) > 30:  # int() on such text takes quadratic time, and no setting is that large
            raise ValueError(f"an integer of {len(digits):,} digits")
        return int(digits)

    try:
        data = json.loads(text, parse_int=bounded_int)
    except RecursionError:
        raise ConfigError(field, f"{path} is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as err:  # JSONDecodeError among them
        raise ConfigError(field, f"{path} cannot be read as JSON: {err}: it was damaged or edited") from None
    _check_shape(data, path, field)
    return data


def _check_shape(data: Any, path: Path, field: str) -> None:
    """Depth, count and length of the values of parsed JSON (walked without recursion)."""
    stack, nodes = [(data, 1)], 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH:
            raise ConfigError(field, f"{path} is nested deeper than {MAX_DEPTH} levels")
        if nodes > MAX_NODES:
            raise ConfigError(field, f"{path} holds more than {MAX_NODES:,} values: not a settings file")
        if isinstance(value, str) and len(value) > MAX_SCALAR_CHARS:
            raise ConfigError(field, f"{path} holds a value of {len(value):,} characters; a setting's value "
                                     f"has at most {MAX_SCALAR_CHARS:,}")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _yaml(text: str, path: Path, field: str) -> Any:
    import yaml  # type: ignore[import-untyped]  # only a run given a YAML file pays for it; PyYAML ships no type hints

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        # The events first, one at a time, and nothing built from them: what would cost too much
        # to build (aliases, depth that would recurse, huge numbers) is refused before it is.
        depth = nodes = 0
        for event in yaml.parse(text, Loader=loader):
            line = f"line {event.start_mark.line + 1}" if event.start_mark else "somewhere"
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise ConfigError(field, f"{path}: {line}: YAML anchors and aliases (&name, *name) are not "
                                         "allowed in a settings file; write each value out")
            if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
                nodes += 1
                if nodes > MAX_NODES:
                    raise ConfigError(field, f"{path} holds more than {MAX_NODES:,} values: not a settings file")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ConfigError(field, f"{path}: {line}: nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_SCALAR_CHARS:
                raise ConfigError(field, f"{path}: {line}: a value of {len(event.value):,} characters; a "
                                         f"setting's value has at most {MAX_SCALAR_CHARS:,}")
        return yaml.load(text, Loader=loader)
    except ConfigError:
        raise
    except yaml.YAMLError as err:  # its message spans lines: the error is one
        raise ConfigError(field, f"{path} cannot be read as YAML: {clipped(' '.join(str(err).split()), 300)}") from None
    except (ValueError, RecursionError) as err:  # what the bounds above let through, if anything
        raise ConfigError(field, f"{path} cannot be read as YAML: {type(err).__name__}") from None
