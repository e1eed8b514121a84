"""``python -m bread_stan.cli``: the ``bread-stan`` command line."""

import sys

from .main import main

sys.exit(main())
