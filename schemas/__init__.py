"""The contract between services: topics, keys, models, serde, the canonical URL."""
