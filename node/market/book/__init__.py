"""The listing book: listings and their lifecycle, bounties, the living market."""
