"""`python -m assets.cli`."""

import sys

from . import main

sys.exit(main())
