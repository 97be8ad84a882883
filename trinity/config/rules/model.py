"""Rules of the model section: where the weights are, the chat template, and the length budget."""

from pathlib import Path

from trinity.config.errors import Report
from trinity.config.model import BuiltModelConfig, GGUFModelConfig, TinyModelConfig, plain_model
from trinity.config.paths import gguf_model_dir, looks_like_path, missing_gguf_converter, tiny_model_dir
from trinity.config.root import Config


def check_model(config: Config, report: Report) -> None:
    model = config.model
    if isinstance(model, BuiltModelConfig) and model.model_path:  # the user's own directory replaces the build
        model = config.model = plain_model(model)
    if isinstance(model, TinyModelConfig) and model.model_path is None:
        model.model_path = tiny_model_dir(model)
    elif isinstance(model, GGUFModelConfig) and model.model_path is None:
        model.model_path = _gguf_model_dir(model, report)
    elif not model.model_path:
        report.problem(
            "model.model_path",
            model.model_path,
            "must name the weights (an empty path is not the tiny model)",
            "set model.model_path=<HF model dir or hub name>, or leave it unset with model=tiny",
        )
    elif looks_like_path(model.model_path) and not Path(model.model_path).expanduser().exists():
        report.problem("model.model_path", model.model_path, "does not exist", "point it at an HF model directory")
    elif _is_dir_without_config(model.model_path):
        report.problem(
            "model.model_path",
            model.model_path,
            "is a directory without config.json, so not an HF model directory",
            "point it at the directory that holds config.json (and the weights), or convert a GGUF file with "
            "`trinity convert gguf FILE OUT_DIR`",
        )
    if not model.critic_model_path:
        model.critic_model_path = model.model_path
    if model.chat_template_path and model.custom_chat_template is None:
        try:
            model.custom_chat_template = Path(model.chat_template_path).expanduser().read_text()
        except OSError as exc:
            report.problem(
                "model.chat_template_path", model.chat_template_path, f"cannot be read ({exc.strerror})", "fix the path"
            )
    _derive_lengths(config, report)


def _is_dir_without_config(path: str) -> bool:
    directory = Path(path).expanduser()
    return directory.is_dir() and not (directory / "config.json").is_file()


def _gguf_model_dir(model: GGUFModelConfig, report: Report) -> str:
    """Where the GGUF file converts to; a missing package or file (or converter, for a first conversion) is a
    problem naming how to get it."""
    source = model.gguf
    key = "model.gguf.package" if source.package else "model.gguf.file"
    try:
        directory = gguf_model_dir(source)
    except FileNotFoundError as exc:
        report.problem(key, source.package or source.file, str(exc), "install it, or point model.gguf at a file")
        return ""
    missing = missing_gguf_converter()
    if missing and not Path(directory).is_dir():
        report.problem(
            key,
            source.package or source.file,
            f"converting it needs {' and '.join(missing)}, not installed",
            "pip install -e '.[gguf]'",
        )
    return directory


def _derive_lengths(config: Config, report: Report) -> None:
    """Length rules: prompt + response fit max_model_len; whichever is empty is derived from the others."""
    model = config.model
    total, prompt, response = model.max_model_len, model.max_prompt_tokens, model.max_response_tokens
    if total is None:
        if prompt is None or response is None:
            report.problem(
                "model.max_model_len",
                None,
                "cannot be derived unless max_prompt_tokens and max_response_tokens are both set",
                "set model.max_model_len (or both max_prompt_tokens and max_response_tokens)",
            )
            return
        model.max_model_len = prompt + response
        return
    if prompt is not None and response is not None:
        if prompt + response > total:
            report.problem(
                "model.max_model_len",
                total,
                f"max_prompt_tokens ({prompt}) + max_response_tokens ({response}) = {prompt + response} does not fit",
                f"raise model.max_model_len to at least {prompt + response}, "
                "or lower max_prompt_tokens / max_response_tokens",
            )
    elif prompt is None and response is None:
        model.max_prompt_tokens = total // 2
        model.max_response_tokens = total - total // 2
    elif prompt is None:
        model.max_response_tokens = min(response, total - 1)
        model.max_prompt_tokens = total - model.max_response_tokens
    else:
        model.max_prompt_tokens = min(prompt, total - 1)
        model.max_response_tokens = total - model.max_prompt_tokens
    if model.max_response_tokens is not None and model.min_response_tokens >= model.max_response_tokens:
        new = max(model.max_response_tokens - 1, 0)
        report.note("model.min_response_tokens", model.min_response_tokens, new, "must stay below max_response_tokens")
        model.min_response_tokens = new
