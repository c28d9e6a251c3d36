"""`python -m linkgraph` runs one linkgraph instance."""

import sys

from linkgraph.service import main

sys.exit(main())
