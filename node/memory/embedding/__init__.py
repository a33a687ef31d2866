"""Every encoder of memory and its weights: text in, unit-length vectors out."""
