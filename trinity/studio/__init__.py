"""Trinity Studio: the page (frame, sidebar, layout, generate and run sections), the page state <->
config mapping under it, and the config registry (`trinity.studio.registry`, one entry per config entry
of the page). `trinity.studio.app.ConfigManager` is the page: it only puts the sections in order. The
seed's paths for the page and the registry, `trinity.manager.config_manager` and
`trinity.manager.config_registry`, re-export them. Imports point down: the Studio reads `trinity.config` and, for a
finished run's summary and learning curve, `trinity.reporting`.

The page holds one value per config entry; every rule, default, range and help text comes from the
schemas in `trinity.config`, and every check is `validate(compose(overrides))` of the page's values.
"""
