"""The dream's synthesisers (seed 001): plain inputs in, MEMORY.md sections out."""
