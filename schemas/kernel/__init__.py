"""The kernel's algorithms: pure functions and rule tables, no I/O and no wire shapes.

CIDs, Ed25519 and secret hashing, page cursors, compression, the injection scanner, the
permission model and its evaluator, the task types and their schemas. The wire models that use
them are the aggregate modules one level up (`schemas.identity`, `schemas.memory`, ...).
"""
