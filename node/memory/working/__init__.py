"""Working memory (seed 001): the scratch WAL, the MEMORY.md state vector and the dream cycle."""
