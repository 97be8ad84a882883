"""Trinity Studio's machinery: the page state <-> config mapping behind `trinity.manager.config_manager`.

The page holds one value per config entry; every rule, default, range and help text comes from the
schemas in `trinity.config`, and every check is `validate(compose(overrides))` of the page's values.
"""
