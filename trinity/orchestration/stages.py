"""Multi-stage runs: each stage starts from the previous stage's latest HF export, and a rerun continues
in the stage that was interrupted (`stage_meta.json` in the experiment directory, written before a
stage starts). A fresh run (`continue_from_checkpoint=false`) gets a new directory and never reads an
old stage file. A distillation stage whose teacher (`explorer.auxiliary_models[0]`) has no model_path
gets the export as its teacher instead, and its student keeps the stage's own model: distilling a model
into itself would give zero advantages.
"""

import logging
import time
from pathlib import Path
from typing import Dict, Optional

from trinity.config.explorer import InferenceModelConfig
from trinity.config.model import plain_model
from trinity.config.root import Config
from trinity.config.validate import Validated, evaluated_after_training, evaluation_of
from trinity.job_layout import CheckpointError, actor_dir, latest_step
from trinity.manager import StateManager
from trinity.model.lora import ADAPTER_CONFIG
from trinity.orchestration.completion import ALREADY_COMPLETE
from trinity.orchestration.job import run_job
from trinity.orchestration.run_gate import exclusive_run
from trinity.reporting.summary import write_summary

logger = logging.getLogger(__name__)

TEACHER_JOB = "teacher_eval"  # the job dir, inside a distillation stage's, of its teacher's evaluation


def run_experiment(validated: Validated) -> Dict[str, float]:
    """Run every stage (or the single config) while holding the run's directory (`run_gate`); returns the
    final metrics of the last stage run, or `{"already_complete": 1.0}` when a rerun has nothing to do."""
    with exclusive_run(validated) as complete:
        if complete:
            print(complete, flush=True)
            return {ALREADY_COMPLETE: 1.0}
        return _run_stages(validated)


def _run_stages(validated: Validated) -> Dict[str, float]:
    configs = validated.configs
    if len(configs) == 1:
        return run_stage(configs[0])
    experiment_dir = Path(configs[0].checkpoint_job_dir).parent
    state = StateManager(str(experiment_dir))
    resume_at = state.load_stage().get("latest_stage", 0) if configs[0].continue_from_checkpoint else 0
    previous, metrics = None, {}
    for index, config in enumerate(configs):
        if index < resume_at:
            logger.info("Skipping completed stage %d (%s).", index, config.name)
        else:
            state.save_stage(index)
            if previous is not None:
                start_from(config, previous)
            logger.info("Starting stage %d (%s) in mode %s.", index, config.name, config.mode)
            metrics = run_stage(config, Path(config.checkpoint_job_dir).name)
        previous = hf_export(config)
    return metrics


def run_stage(config: Config, stage: Optional[str] = None) -> Dict[str, float]:
    """Run one stage's job, then leave its summary.json (and learning curve) in its job dir.

    A stage with held-out sets that has no explorer to evaluate them while it trains (mode train: SFT,
    DPO) is evaluated after it, on its start and on each checkpoint it saved, by a bench job in its job
    dir (`evaluation_of`). A distillation stage's teacher is evaluated on the same sets, so the summary
    shows how far the student is from it."""
    started = time.perf_counter()
    metrics = run_job(config)
    teacher = None
    if evaluated_after_training(config):
        logger.info("Evaluating stage %s on its held-out sets (start and saved checkpoints).", config.name)
        evaluated = run_job(evaluation_of(config))
        metrics.update({tag: value for tag, value in evaluated.items() if tag.startswith("eval/")})
    if config.algorithm.uses_teacher and config.buffer.explorer_input.eval_tasksets:
        teacher_path = config.explorer.auxiliary_models[0].model_path
        logger.info("Evaluating the teacher %s on the held-out sets.", teacher_path)
        teacher = {"model_path": teacher_path, **run_job(evaluation_of(config, teacher_path, TEACHER_JOB))}
    write_summary(config, metrics, time.perf_counter() - started, stage, teacher)
    return metrics


def hf_export(config: Config) -> str:
    """The HF-format weights of a finished stage: its latest checkpoint's `actor/huggingface` (with LoRA, the
    adapter directory)."""
    step = latest_step(config.checkpoint_job_dir)
    path = None if step is None else actor_dir(config.checkpoint_job_dir, step) / "huggingface"
    if path is None or not any((path / name).exists() for name in ("config.json", ADAPTER_CONFIG)):
        raise CheckpointError(
            f"stage {config.name} left no HF export to start the next stage from (looked in {path}); "
            "it must train and save at least once"
        )
    return str(path)


def start_from(config: Config, model_path: str) -> None:
    """Hand the previous stage's weights on: to an unset distillation teacher, else to the stage's model (with
    LoRA, the previous stage's adapter to the stage's adapter, on the same base)."""
    teacher = _unset_teacher(config)
    if teacher is not None:
        teacher.model_path = model_path
        return
    if config.model.lora_configs and (Path(model_path) / ADAPTER_CONFIG).exists():
        lora = config.model.lora_configs[0]
        lora.path, lora.is_dummy = model_path, False
        return
    previous, critic = config.model.model_path, config.model.critic_model_path
    config.model = plain_model(
        config.model, model_path=model_path, critic_model_path=model_path if critic in ("", previous) else critic
    )
    config.explorer.rollout_model.model_path = model_path


def _unset_teacher(config: Config) -> Optional[InferenceModelConfig]:
    """The stage's distillation teacher when its model_path is left for the previous stage to fill."""
    aux = config.explorer.auxiliary_models
    if config.algorithm.uses_teacher and aux and aux[0].model_path is None:
        return aux[0]
    return None
