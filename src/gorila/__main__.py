"""``python -m gorila``: the ``gorila`` command."""

from gorila.cli import command

command()
