"""The tool catalogue of spec 4.7, one module per group; importing a module registers its
tools in `toolserver.registry.CATALOGUE`. The Packs group is not here yet."""

from toolserver.tools import apps, crypto, diaries, entries, identity, tasks, teams

__all__ = ["apps", "crypto", "diaries", "entries", "identity", "tasks", "teams"]
