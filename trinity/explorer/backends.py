"""The engine backend each `engine_type` names: the one place that knows every `LocalEngine` class."""

from trinity.config.explorer import EngineType
from trinity.explorer.engine import EngineSpec, LocalEngine


def create_engine(spec: EngineSpec) -> LocalEngine:
    """The backend `spec.model.engine_type` names (imported only when used: each pulls in its library)."""
    if spec.model.engine_type == EngineType.hf:
        from trinity.explorer.hf_engine import HFEngine

        return HFEngine(spec)
    if spec.model.engine_type == EngineType.vllm:
        from trinity.explorer.vllm_engine import VLLMEngine

        return VLLMEngine(spec)
    raise NotImplementedError(
        f"engine_type={spec.model.engine_type} has no backend yet; use explorer=default (engine_type=hf)"
    )
