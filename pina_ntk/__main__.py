"""``python -m pina_ntk``: the ``pina-ntk`` command."""

import sys

from pina_ntk.paper.cli import main

if __name__ == "__main__":
    sys.exit(main())
