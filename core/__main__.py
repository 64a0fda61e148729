"""``python -m tripwire``: the ``tripwire`` command (where its script is not on the PATH)."""

from __future__ import annotations

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
