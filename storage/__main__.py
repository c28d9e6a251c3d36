"""`python -m storage` runs one storage instance."""

from storage.service import main
from streamcrawl.service import run_main

run_main("storage", main)
