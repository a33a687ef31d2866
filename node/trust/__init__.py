"""trust"""
