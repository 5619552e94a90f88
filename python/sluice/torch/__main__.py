"""python -m sluice.torch diagnose SCRIPT.py (sluice/torch/cli.py)."""

import sys

from .cli import main

sys.exit(main())
