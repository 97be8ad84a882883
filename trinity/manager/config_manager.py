"""Trinity Studio: a Streamlit page that writes configs the CLI runs (`trinity studio` serves it).

Each rerun: keep the page's values (`maintain_session_state`), build the override list of the values that
differ from the defaults and validate it exactly as `python -m trinity` would, render the selected mode's
fields with the problems validation found on them, then offer the config (`generate_config`) and a run
of it (`run_config`). Streamlit runs this file as a script: the last line builds the page.
"""

import copy
import os
import time
from pathlib import Path
from typing import Optional

import streamlit as st
from omegaconf import OmegaConf

from trinity.manager.config_registry import CONFIG_GENERATORS
from trinity.manager.config_registry.algorithm_config_manager import advanced_arg_names
from trinity.manager.config_registry.buffer_config_manager import get_train_batch_size, get_train_batch_size_per_gpu
from trinity.studio import loading, output, page, runs, session
from trinity.studio.metrics import latest_scalars
from trinity.studio.selection import GROUP_KEYS, all_options
from trinity.studio.visibility import explorer_visible, offline, use_critic
from trinity.studio.widgets import render_derived

MODES = ("Beginner Mode", "Expert Mode")
SCHEMA_DEFAULTS, DEFAULT_EXPERIMENT = "(schema defaults)", "(default experiment: conf/config.yaml)"
RUN_KEY, MESSAGE_KEY, RUN_MESSAGE_KEY = "_run", "_load_message", "_run_message"

# the page's own session keys (not config entries) and their defaults
PAGE_DEFAULTS = {
    "mode_switch": MODES[0],
    "_last_mode": MODES[0],
    page.EXTRA_KEY: page.SINGLE_STAGE,
    "config_generated": False,
    "load_path": "",
    "start_from": SCHEMA_DEFAULTS,
    "save_dir": "",
    "ray_job_address": "",
    "run_dry": False,
}


class ConfigManager:
    """The Studio page. Constructing it renders one run of the page."""

    def __init__(self) -> None:
        st.set_page_config(page_title="Trinity Studio", layout="wide")
        self.registry = CONFIG_GENERATORS
        if "_init_config_manager" not in st.session_state:
            self.reset_session_state()
            st.session_state["_init_config_manager"] = True
        self.registry.unfinished_fields = set()
        self.maintain_session_state()
        st.session_state[page.PAGE_KEY] = page.build(self.registry)
        st.title("Trinity Studio")
        st.caption(
            "Writes configs that `python -m trinity` runs. Every default, range and help text comes from the "
            "config schemas, and every check is the CLI's own validation."
        )
        self.sidebar()
        mode = st.segmented_control("Mode", MODES, key="mode_switch", on_change=self._keep_mode)
        if mode == MODES[1]:
            self.expert_mode()
        else:
            self.beginner_mode()
        self.generate_config()
        self.run_config()

    # ---- session state -------------------------------------------------------------------------

    def reset_session_state(self) -> None:
        """Every config entry at its schema default, the page's own keys at theirs."""
        session.reset(self.registry, PAGE_DEFAULTS)

    def maintain_session_state(self) -> None:
        """Keep values of widgets not shown in this run, sync list items, let defaults follow the selection."""
        session.maintain(self.registry, PAGE_DEFAULTS)

    def get_configs(self, *names: str, columns_spec: Optional[list] = None) -> None:
        self.registry.get_configs(*names, columns_spec=columns_spec)

    @staticmethod
    def _keep_mode() -> None:
        """Clicking the selected mode again deselects it; keep the last one instead."""
        state = st.session_state
        if state["mode_switch"] is None:
            state["mode_switch"] = state["_last_mode"]
        state["_last_mode"] = state["mode_switch"]

    # ---- loading -------------------------------------------------------------------------------

    def sidebar(self) -> None:
        with st.sidebar:
            st.header("Load a config")
            st.text_input("YAML file on this machine", key="load_path", placeholder="/path/to/experiment.yaml")
            st.button("Load file", key="load_file", on_click=self._load_path)
            st.file_uploader("Or upload a YAML file", type=["yaml", "yml"], key="upload")
            st.button("Load upload", key="load_upload", on_click=self._load_upload)
            st.divider()
            presets = [SCHEMA_DEFAULTS, DEFAULT_EXPERIMENT, *all_options("experiment")]
            st.selectbox("Start from", presets, key="start_from")
            st.button("Start over", key="start_over", on_click=self._start_from)
            kind, text = st.session_state.get(MESSAGE_KEY, ("", ""))
            if kind == "error":
                st.error(text)
            elif kind:
                st.success(text)

    def _load_path(self) -> None:
        path = Path(st.session_state["load_path"].strip()).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            st.session_state[MESSAGE_KEY] = ("error", f"Cannot read {path}: {exc.strerror}")
            return
        self._load(lambda: loading.load_text(text, path.stem), str(path))

    def _load_upload(self) -> None:
        uploaded = st.session_state.get("upload")
        if uploaded is None:
            st.session_state[MESSAGE_KEY] = ("error", "Choose a file to upload first.")
            return
        text = uploaded.getvalue().decode("utf-8")
        self._load(lambda: loading.load_text(text, Path(uploaded.name).stem), uploaded.name)

    def _start_from(self) -> None:
        choice = st.session_state["start_from"]
        if choice == SCHEMA_DEFAULTS:
            session.reset(self.registry, {page.EXTRA_KEY: page.SINGLE_STAGE, "config_generated": False})
            st.session_state[MESSAGE_KEY] = ("ok", "Every field is back at its schema default.")
            return
        name = None if choice == DEFAULT_EXPERIMENT else choice
        self._load(lambda: loading.load_preset(name), choice)

    def _load(self, compose_file, label: str) -> None:
        try:
            loaded = compose_file()
            self._apply(loaded)
        except (loading.LoadError, ValueError) as exc:
            st.session_state[MESSAGE_KEY] = ("error", f"Could not load {label}: {exc}")
            return
        warnings = "".join(f"\n\nNote: {warning}." for warning in loaded.warnings)
        st.session_state[MESSAGE_KEY] = ("ok", f"Loaded {label}.{warnings}")

    def _apply(self, loaded: loading.Loaded) -> None:
        """Put a composed config into the page: fields take its values, other keys become override lines."""
        state = st.session_state
        owned = self.registry.default_config()
        for key, value in owned.items():
            state[key] = copy.deepcopy(value)
        for group, key in GROUP_KEYS.items():
            state[key] = loaded.choices[group]
        chosen = loaded.selection()
        for name in self.registry.names():
            for binding in self.registry.bindings_of(name):
                if binding.group is None and binding.key in owned and (resolved := binding.resolve(chosen)):
                    state[binding.key] = loading.field_value(loaded.config, *resolved)
        state[session.APPLIED_KEY] = page.selection()
        covered = {path for _, path, _ in page.contributing(self.registry, page.selection())}
        kept = loading.kept_overrides(loaded, covered, page.selection().group_overrides())
        state[page.EXTRA_KEY] = "\n".join(kept)
        state["config_generated"] = False

    # ---- layouts -------------------------------------------------------------------------------

    def beginner_mode(self) -> None:
        """The essential fields: project, checkpoint dir, model, algorithm, dataset, batch sizes, devices, sync."""
        st.header("Global")
        self.get_configs("project", "exp_name")
        self.get_configs("checkpoint_root_dir")
        self.get_configs("monitor_type", "log_level", "save_interval")
        st.header("Model")
        self.get_configs("model_group", "model_path", "max_model_len", columns_spec=[1, 3, 1])
        st.header("Algorithm")
        self.get_configs("algorithm_type", "repeat_times", "actor_lr", "critic_lr")
        st.header("Dataset")
        if offline():
            self.get_configs("experience_buffer_path", "train_batch_size", columns_spec=[3, 1])
            self.get_configs("dpo_dataset_kwargs")
            self.get_configs("sft_dataset_kwargs")
        else:
            self.get_configs("taskset_path", "explore_batch_size", columns_spec=[3, 1])
            self.get_configs("taskset_args")
            self.get_configs("default_workflow_type", "default_reward_fn_type")
        self.get_configs("total_epochs", "total_steps")
        st.header("Resources")
        self.get_configs("node_num", "gpu_per_node", "cpu_devices_per_node")
        self.get_configs("engine_num", "tensor_parallel_size")
        self.get_configs("trainer_gpu_num_display", "actor_ulysses_sequence_parallel_size")
        if explorer_visible():
            st.header("Synchronizer")
            self.get_configs("sync_method", "sync_style", "sync_interval")

    def expert_mode(self) -> None:
        """Every entry, in tabs; the explorer tab only while the explorer runs."""
        names = ["Model", "Buffer", "Explorer and Synchronizer", "Trainer", "Other keys"]
        if not explorer_visible():
            names.remove("Explorer and Synchronizer")
        tabs = dict(zip(names, st.tabs(names), strict=True))
        with tabs["Model"]:
            self._expert_model()
        with tabs["Buffer"]:
            self._expert_buffer()
        if "Explorer and Synchronizer" in tabs:
            with tabs["Explorer and Synchronizer"]:
                self._expert_explorer()
        with tabs["Trainer"]:
            self._expert_trainer()
        with tabs["Other keys"]:
            st.text_area(
                "Other keys (one Hydra override per line)",
                key=page.EXTRA_KEY,
                height=160,
                help="Keys no field above sets, e.g. explorer.max_timeout=600. A loaded file's other keys land here.",
            )
            page.report_problems(
                page.EXTRA_KEY, [page.EXTRA_KEY, *page.current().extra_keys], self.registry.unfinished_fields
            )

    def _expert_model(self) -> None:
        self.get_configs("project", "exp_name")
        self.get_configs("checkpoint_root_dir")
        self.get_configs("model_group", "model_path", columns_spec=[1, 4])
        self.get_configs("critic_model_path")
        self.get_configs("monitor_type", "log_level", "node_num", "gpu_per_node", "cpu_devices_per_node")
        self.get_configs("max_prompt_tokens", "max_response_tokens", "min_response_tokens", "max_model_len")

    def _expert_buffer(self) -> None:
        self.get_configs("total_epochs", "total_steps", "explore_batch_size", "train_batch_size")
        self._batch_row()
        self.get_configs("default_workflow_type", "default_eval_workflow_type", "default_reward_fn_type")
        if offline():
            with st.expander("Dataset", expanded=True):
                self.get_configs("experience_buffer_path")
                self.get_configs("storage_type")
                self.get_configs("dpo_dataset_kwargs")
                self.get_configs("sft_dataset_kwargs")
        else:
            with st.expander("Taskset", expanded=True):
                self.get_configs("taskset_path")
                self.get_configs("taskset_args")
            with st.expander("Eval tasksets", expanded=True):
                self.get_configs("eval_tasksets")
            with st.expander("Experience buffer", expanded=True):
                self.get_configs("storage_type", "experience_buffer_path", columns_spec=[1, 3])
                self.get_configs("enable_replay_buffer")
                self.get_configs("reuse_cooldown_time", "priority_fn")
                self.get_configs("priority_fn_args")
        self.get_configs("buffer_max_retry_times", "max_retry_interval")

    def _batch_row(self) -> None:
        """The batch sizes validation derives, read-only."""
        per_step, per_device = st.columns(2)
        with per_step:
            render_derived("derived_train_batch_size", get_train_batch_size(), "Train batch size (derived)", "")
        with per_device:
            render_derived(
                "derived_train_batch_size_per_gpu", get_train_batch_size_per_gpu(), "Per trainer device (derived)", ""
            )

    def _expert_explorer(self) -> None:
        self.get_configs("sync_method", "sync_style", "sync_interval", "sync_timeout")
        self.get_configs("runner_per_model", "eval_interval")
        with st.expander("Rollout model", expanded=True):
            self.get_configs("explorer_group", "engine_num", "tensor_parallel_size")
            self.get_configs("total_gpu_num", "trainer_gpu_num")
            self.get_configs("gpu_memory_utilization", "dtype", "seed")
            self.get_configs("enforce_eager", "enable_prefix_caching", "enable_chunked_prefill")
            self.get_configs("enable_thinking", "enable_history")
            self.get_configs("enable_openai_api", "enable_auto_tool_choice")
            self.get_configs("tool_call_parser", "reasoning_parser")
        with st.expander("Auxiliary models", expanded=True):
            self.get_configs("auxiliary_models")

    def _expert_trainer(self) -> None:
        self.get_configs("algorithm_type", "repeat_times", "save_interval")
        self.get_configs("policy_loss_fn", "advantage_fn", "sample_strategy")
        self.get_configs("kl_penalty_fn", "use_kl_in_reward", "kl_loss_fn", "kl_coef_in_kl_loss_fn")
        self.get_configs("entropy_loss_fn", "entropy_coef_in_entropy_loss_fn")
        with st.expander("Advanced algorithm config", expanded=True):
            names = advanced_arg_names()
            for start in range(0, len(names), 3):
                self.get_configs(*names[start : start + 3])
        self.get_configs("trainer_type", "enable_preview")
        tab_names = ["Training", "Actor and reference"] + (["Critic"] if use_critic() else [])
        tabs = st.tabs(tab_names)
        with tabs[0]:
            self.get_configs("training_args")
            self.get_configs("ppo_epochs", "training_strategy", "resume_mode", "impl_backend")
            self.get_configs("resume_from_path")
            self.get_configs("param_offload", "optimizer_offload", "forward_prefetch")
            self.get_configs("offload_policy", "reshard_after_forward")
            self.get_configs("grad_offload", "sequence_parallel", "use_distributed_optimizer")
            self.get_configs(
                "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size"
            )
            self.get_configs("expert_model_parallel_size", "expert_tensor_parallel_size", "context_parallel_size")
            self.get_configs("use_dist_checkpointing", "dist_checkpointing_path", "use_mbridge")
            self.get_configs("recompute_granularity", "recompute_method", "recompute_num_layers")
            self.get_configs("recompute_modules")
            with st.expander("Checkpoints and resume", expanded=False):
                self.get_configs("critic_warmup")
                self.get_configs("default_hdfs_dir")
                self.get_configs("del_local_ckpt_after_load")
                self.get_configs("max_actor_ckpt_to_keep", "max_critic_ckpt_to_keep")
        with tabs[1]:
            self.get_configs("actor_lr", "actor_warmup_style", "actor_lr_warmup_steps_ratio")
            self.get_configs("actor_grad_clip", "actor_ulysses_sequence_parallel_size")
            self.get_configs(
                "actor_ppo_micro_batch_size_per_gpu",
                "ref_log_prob_micro_batch_size_per_gpu",
                "actor_ppo_max_token_len_per_gpu",
            )
            self.get_configs("actor_entropy_from_logits_with_chunking", "actor_entropy_checkpointing")
            self.get_configs("actor_load_checkpoint")
            self.get_configs("actor_save_checkpoint")
        if use_critic():
            with tabs[2]:
                self.get_configs("critic_ppo_micro_batch_size_per_gpu", "critic_ulysses_sequence_parallel_size")
                self.get_configs("critic_lr", "critic_warmup_style", "critic_lr_warmup_steps_ratio")
                self.get_configs("critic_grad_clip", "critic_cliprange_value")
                self.get_configs("critic_load_checkpoint", "critic_save_checkpoint")

    # ---- output --------------------------------------------------------------------------------

    def _stem(self) -> str:
        return output.file_stem(str(st.session_state["project"]), str(st.session_state["exp_name"]))

    def generate_config(self) -> None:
        """The Generate button (disabled while anything fails, listing what), then the files it writes."""
        current = page.current()
        st.header("Generate config")
        unshown = current.unshown()
        if unshown:
            st.error("Problems not shown with a field above:\n\n" + "\n".join(f"- {problem}" for problem in unshown))
        failing = sorted(self.registry.unfinished_fields | {problem.key for problem in unshown})
        st.button(
            "Generate Config",
            key="generate_config",
            type="primary",
            disabled=not current.valid,
            help=("Fix first: " + ", ".join(failing)) if failing else "Write the config file, preset and command.",
            on_click=lambda: st.session_state.update(config_generated=True),
        )
        if not current.valid:
            st.caption("Fix first: " + ", ".join(failing))
            if st.session_state["config_generated"]:
                st.info("The page changed and has problems now; the files come back once they are fixed.")
            return
        if st.session_state["config_generated"]:
            self._show_outputs(current)

    def _show_outputs(self, current: page.Page) -> None:
        stem = self._stem()
        config_text = output.config_file(current.overrides, stem)
        preset_text = output.experiment_preset(current.overrides, stem)
        tabs = st.tabs(["Config file", "Experiment preset", "Command line", "Resolved config"])
        with tabs[0]:
            st.code(config_text, language="yaml")
            st.download_button("Save", config_text, file_name=f"{stem}.yaml", mime="text/yaml", key="download_config")
        with tabs[1]:
            st.code(preset_text, language="yaml")
            st.download_button(
                "Save preset", preset_text, file_name=f"{stem}.yaml", mime="text/yaml", key="download_preset"
            )
        with tabs[2]:
            st.code(output.command_line(current.overrides), language="bash")
        with tabs[3]:
            st.code(OmegaConf.to_yaml(OmegaConf.structured(current.evaluation.config)), language="yaml")
        if current.evaluation.notes:
            st.info("Validation adjusted:\n\n" + "\n".join(f"- {note}" for note in current.evaluation.notes))

    # ---- running -------------------------------------------------------------------------------

    def run_config(self) -> None:
        """Save the generated config and run it (here as a subprocess, or as a Ray job), then follow it."""
        current = page.current()
        st.header("Run")
        run = st.session_state.get(RUN_KEY)
        running = run is not None and not run.status().finished
        if current.valid and st.session_state["config_generated"]:
            where, address = st.columns(2)
            where.text_input("Save directory on this machine", key="save_dir", placeholder=self._default_dir())
            address.text_input(
                "Ray job address", key="ray_job_address", placeholder="empty: run here; e.g. http://127.0.0.1:8265"
            )
            st.checkbox("Dry run (validate and print the resolved config; start nothing)", key="run_dry")
            save, start = st.columns(2)
            save.button("Save config", key="save_config", on_click=self._save_clicked)
            start.button("Run", key="run", type="primary", disabled=running, on_click=self._start_run)
        else:
            st.caption("Generate a valid config to save or run it.")
        kind, text = st.session_state.get(RUN_MESSAGE_KEY, ("", ""))
        if kind == "error":
            st.error(text)
        elif kind:
            st.success(text)
        if run is not None:
            st.session_state["_run_was_running"] = running
            st.fragment(run_every=2.0 if running else None)(self._run_status)()

    def _default_dir(self) -> str:
        config = page.current().evaluation.config
        return os.path.join(config.checkpoint_root_dir, "studio") if config is not None else "studio"

    def _save(self) -> Path:
        """Write the config file atomically into the save directory and return its path."""
        directory = Path(st.session_state["save_dir"].strip() or self._default_dir()).expanduser().resolve()
        directory.mkdir(parents=True, exist_ok=True)
        stem = self._stem()
        target = directory / f"{stem}.yaml"
        temporary = directory / f".{stem}.yaml.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(output.config_file(page.current().overrides, stem))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
        return target

    def _save_clicked(self) -> None:
        try:
            path = self._save()
        except OSError as exc:
            st.session_state[RUN_MESSAGE_KEY] = ("error", f"Could not save: {exc}")
            return
        command = f"python -m trinity --config-dir {path.parent} --config-name {path.stem}"
        st.session_state[RUN_MESSAGE_KEY] = ("ok", f"Saved {path}. Run it with: {command}")

    def _start_run(self) -> None:
        try:
            path = self._save()
        except OSError as exc:
            st.session_state[RUN_MESSAGE_KEY] = ("error", f"Could not save: {exc}")
            return
        extra = ["dry_run=true"] if st.session_state["run_dry"] else []
        job_dir = page.current().evaluation.config.checkpoint_job_dir
        address = st.session_state["ray_job_address"].strip()
        try:
            if address:
                run = runs.RayJobRun.start(
                    address, str(path.parent), path.stem, [*extra, "cluster.ray_address=auto"], job_dir
                )
            else:
                command = runs.trinity_command(str(path.parent), path.stem, extra)
                run = runs.LocalRun.start(command, path.with_suffix(".log"), os.getcwd(), job_dir)
        except runs.RayJobsUnavailable as exc:
            st.session_state[RUN_MESSAGE_KEY] = ("error", str(exc))
            return
        except Exception as exc:  # noqa: BLE001  (a cluster that cannot be reached: say so on the page)
            st.session_state[RUN_MESSAGE_KEY] = ("error", f"Could not start the run: {exc}")
            return
        st.session_state[RUN_KEY] = run
        st.session_state[RUN_MESSAGE_KEY] = ("ok", f"Started {run.where} with {path}.")

    def _stop_run(self) -> None:
        run = st.session_state.get(RUN_KEY)
        if run is not None:
            status = run.stop()
            st.session_state[RUN_MESSAGE_KEY] = ("ok", f"Stopped {run.where} ({status.state}).")

    def _run_status(self) -> None:
        run = st.session_state[RUN_KEY]
        status = run.status()
        if status.finished and st.session_state.get("_run_was_running"):
            st.session_state["_run_was_running"] = False
            st.rerun()  # the whole page, so the Run button is enabled again
        elapsed = int(time.time() - run.started)
        if status.state == "running":
            st.info(f"Running: {run.where}, {elapsed} s")
            st.button("Stop", key="stop_run", on_click=self._stop_run)
        elif status.state == "succeeded":
            st.success(f"Finished: exit code 0 ({run.where}, {elapsed} s)")
        elif status.state == "stopped":
            st.warning(f"Stopped ({run.where}, exit code {status.returncode})")
        else:
            st.error(f"Failed: exit code {status.returncode} ({run.where})")
        scalars = latest_scalars(run.job_dir) if run.job_dir else {}
        if scalars:
            st.table([{"metric": tag, "step": step, "value": value} for tag, (step, value) in scalars.items()])
        else:
            st.caption("No metrics yet (TensorBoard event files under the job directory).")
        st.code(run.log_tail() or "(no output yet)", language="text")


if __name__ == "__main__":
    ConfigManager()
