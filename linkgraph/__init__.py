"""The link-graph service (DESIGN.md sections 1 and 3).

Forward, reverse and anchor indexes in RocksDB, graph queries and the ranker.
"""
