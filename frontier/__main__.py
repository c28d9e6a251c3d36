"""`python -m frontier` runs one frontier instance."""

import sys

from frontier.service import main

sys.exit(main())
