"""Cairn: agent memory and task coordination."""

__version__ = "0.1.0"
