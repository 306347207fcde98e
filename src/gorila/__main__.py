"""``python -m gorila``: the ``gorila`` command (:mod:`gorila.entry` drops the current directory
from the import path first)."""

from gorila.entry import command

command()
