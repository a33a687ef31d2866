"""Memory that learns (seed 003/004): facts, confidence, energy tiers, testaments, context under a budget."""
