"""The fetcher service: per-host politeness, robots.txt and safe HTTP fetching (DESIGN.md 3.4)."""
