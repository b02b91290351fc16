"""The transaction coordinator: transactional ids, producer epochs and two-phase commits (KIP-98)."""
