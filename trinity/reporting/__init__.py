"""What a run tells its user: the console while it runs (the job's relayed output and progress bars) and,
when it ends, each job's summary.json and learning-curve picture and the driver's tables.

Imports run one way: `console` -> `progress`; `report` -> `summary` -> `curves` -> `tags` (the metric
tags they all read)."""
