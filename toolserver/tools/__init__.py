"""The tool catalogue of spec 4.7, one module per group; importing a module registers its
tools in `toolserver.registry.CATALOGUE`."""

from toolserver.tools import apps, crypto, diaries, entries, identity, packs, tasks, teams

__all__ = ["apps", "crypto", "diaries", "entries", "identity", "packs", "tasks", "teams"]
