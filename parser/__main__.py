"""`python -m parser` runs one parser instance."""

import sys

from parser.service import main

sys.exit(main())
