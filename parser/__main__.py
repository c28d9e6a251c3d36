"""`python -m parser` runs one parser instance."""

from parser.service import main
from streamcrawl.service import run_main

run_main("parser", main)
