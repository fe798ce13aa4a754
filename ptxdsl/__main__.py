"""`python -m ptxdsl ...`: the `ptxdsl` command line (ptxdsl.cli)."""
import sys

from .cli import main

sys.exit(main())
