"""``python -m gorila``: the ``gorila`` command."""

import sys

from gorila.cli import command

sys.exit(command())
