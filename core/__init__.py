"""Shared bottom layer: configuration, errors, artifacts, chain access, storage.

Imports nothing else of veritrain's.
"""
