"""market"""
