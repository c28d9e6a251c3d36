"""The frontier service (DESIGN.md sections 1 and 3).

Crawl registry, admission (dedup and scope), per-host disk queues, leases, retries, recrawl and the
crawl-control API.
"""
