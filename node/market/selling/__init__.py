"""Selling: quality gates, pricing, publishing and the seller's catalogue."""
