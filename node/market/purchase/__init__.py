"""A purchase end to end: buyer, seller, terms, payment proof, reconciliation, x402."""
