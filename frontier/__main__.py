"""`python -m frontier` runs one frontier instance."""

from frontier.service import main
from streamcrawl.service import run_main

run_main("frontier", main)
