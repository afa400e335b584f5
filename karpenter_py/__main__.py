"""The process entry point (``karpenter-py`` and ``python -m karpenter_py``).

The controller runs on uvloop; the CLI's other commands do not need an event loop at all.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from karpenter_py.cli.main import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["controller"]:
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency, but not on every platform
            pass
        else:
            uvloop.install()
        from karpenter_py.manager import run

        return run(args[1:])  # settings flags are the manager's to parse
    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
