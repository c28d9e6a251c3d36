"""The shared kernel and the `streamcrawl` command line."""
