"""``python -m karpenter_py``: the ``karpenter-py`` command line."""

from __future__ import annotations

import sys

from karpenter_py.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
