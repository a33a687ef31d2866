"""Listings sync: late joiners and nodes that were away catch up (issues 13, 38)."""
