"""`python -m fetcher` runs one fetcher instance."""

from fetcher.service import main
from streamcrawl.service import run_main

run_main("fetcher", main)
