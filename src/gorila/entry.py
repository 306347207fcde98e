"""The ``gorila`` executable and ``python -m gorila``: the current directory off the import path
first, then the command::

    gorila eval .              # from inside a run directory: nothing of the directory is imported

``python -m`` puts the current directory first on ``sys.path``, and an empty entry of ``PYTHONPATH``
(one ending in ``:``) puts it there for any script: a ``json.py`` or ``numpy.py`` shipped in a run
directory would then run as gorila imported them. The entry drops that directory before it
imports anything but ``os`` and ``sys`` (which Python has loaded before any script). A directory
named in ``PYTHONPATH`` on purpose (``PYTHONPATH=.``, to make an env of one's own module) stays.
This module imports nothing else, and ``gorila/__init__.py`` nothing at all, so that nothing is
looked up on the path before it is cleaned.
"""

import os
import sys


def drop_working_directory(path: list[str], cwd: str, pythonpath: str) -> list[str]:
    """``path`` without the current directory ``cwd`` where only Python put it there (``''``,
    ``python -m``'s first entry, an empty entry of ``pythonpath``); kept where ``pythonpath``
    names it."""
    def here(entry: str) -> bool:
        return os.path.normpath(os.path.join(cwd, entry)) == cwd

    named = any(entry and here(entry) for entry in pythonpath.split(os.pathsep))
    return [entry for entry in path if entry != "" and (named or not here(entry))]


def command() -> None:
    """Run the ``gorila`` command line (:func:`gorila.cli.command`) with the import path cleaned."""
    try:
        cwd = os.getcwd()
    except OSError:  # a directory removed under the shell: nothing can be imported from it anyway
        cwd = ""
    sys.path[:] = drop_working_directory(sys.path, cwd, os.environ.get("PYTHONPATH", ""))
    from gorila.cli import command as run

    run()
