"""crystals"""
