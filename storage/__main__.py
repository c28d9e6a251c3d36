"""`python -m storage` runs one storage instance."""

import sys

from storage.service import main

sys.exit(main())
