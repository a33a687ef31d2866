"""Local devnet: chain + node processes on loopback."""
