"""`python -m linkgraph` runs one linkgraph instance."""

from linkgraph.service import main
from streamcrawl.service import run_main

run_main("linkgraph", main)
