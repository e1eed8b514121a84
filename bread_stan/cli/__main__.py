"""``python -m bread_stan.cli``: the ``bread-stan`` command line."""

import sys

from .main import main

if __name__ == "__main__":  # importing the module (docs checks, indexes) runs nothing
    sys.exit(main())
