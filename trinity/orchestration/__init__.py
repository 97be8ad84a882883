"""Running validated configs: Ray cluster and device reservations, one job in its mode, multi-stage runs."""
