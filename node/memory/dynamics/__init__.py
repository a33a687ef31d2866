"""How memory changes by itself (seed 000): importance, consolidation, hormones."""
