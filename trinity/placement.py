"""Pinning an actor to one device bundle of its job's placement group: the job reserves the group,
and the actors it starts place their engines and trainer ranks with this, without reaching up into
the orchestration that made it."""

from typing import Optional

from ray.util.placement_group import PlacementGroup
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


def in_bundle(group: Optional[PlacementGroup], index: int) -> dict:
    """Actor options that pin it to bundle `index` of the job's placement group."""
    if group is None:
        return {}
    return {
        "scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=index
        )
    }
