"""`python -m fetcher` runs one fetcher instance."""

import sys

from fetcher.service import main

sys.exit(main())
