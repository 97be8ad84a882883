"""Trinity Studio: the page (frame, sidebar, layout, generate and run sections) and the page state <->
config mapping under it. `trinity.manager.config_manager.ConfigManager`, the seed's name for the page,
only puts the sections in order; `trinity.manager.config_registry` declares the entries. Imports point
one way: those views -> trinity.studio -> trinity.config.

The page holds one value per config entry; every rule, default, range and help text comes from the
schemas in `trinity.config`, and every check is `validate(compose(overrides))` of the page's values.
"""
