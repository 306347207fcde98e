"""``python -m gorila``: the ``gorila`` command."""

import sys

from gorila.cli import main

sys.exit(main())
