"""A plug-in module whose import fails: validation must report it, not crash."""

raise RuntimeError("this plug-in cannot be imported")
