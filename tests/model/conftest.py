"""The tiny model directory the model tests load, built once for the folder."""

import pytest

from trinity.config.model import TinyModelConfig, TinyModelSpec
from trinity.model.tiny import ensure_tiny_model


@pytest.fixture(scope="package")
def tiny_dir(tmp_path_factory):
    return ensure_tiny_model(TinyModelConfig(tiny=TinyModelSpec(cache_dir=str(tmp_path_factory.mktemp("models")))))
