"""Base class for the Enums that list a field's allowed values.

OmegaConf converts YAML strings to Enum members *by member name*, so every member is named exactly
like its value (`nccl = "nccl"`). The `str` mixin keeps members comparable with and serialisable as
their plain string value.
"""

import enum


class Choice(str, enum.Enum):
    """A string-valued Enum whose member names equal their values."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def values(cls) -> list:
        return [member.value for member in cls]
