"""The explorer and trainer actors forward exactly their role's methods."""

import inspect

import pytest

from trinity.explorer.explorer import Explorer
from trinity.orchestration.roles import ROLE_CLASSES, ROLE_METHODS
from trinity.trainer.trainer import Trainer


@pytest.mark.parametrize("role, cls", [("explorer", Explorer), ("trainer", Trainer)])
def test_each_public_method_of_a_role_is_forwarded(role, cls):
    public = {name for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction) if not name.startswith("_")}
    assert set(ROLE_METHODS[role]) == public
    assert ROLE_CLASSES[role] == f"{cls.__module__}:{cls.__name__}"
    plain = [name for name, member in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")]
    assert set(plain) <= public, f"{role}: a public method that is not async cannot be forwarded: {plain}"
