"""Everything a query passes through: candidates, fusion, lexical, negation, compound, windows, second opinion, LLM stage."""
