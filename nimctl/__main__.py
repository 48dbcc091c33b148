"""``python -m nimctl``: the same program as the ``nimctl`` console script."""

import sys

from nimctl.cli import main

sys.exit(main())
