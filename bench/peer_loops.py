"""The two single-process baselines of bench/peer.py, each run as its own process in its own environment
(bench/peer_envs.py): a minimal GRPO loop in plain torch (`bare`) and TRL's GRPOTrainer (`trl`). Both do the
GRPO work of the trinity run they are compared with, on the model and data bench/peer.py prepares, and print
one JSON line per finished step: {"step", "t", "reward"}. They import nothing of trinity: the reward function
is read from trinity's source file (standard library only), and a process that ends up holding a module of
another stack (vLLM, Ray, trinity; TRL in the bare loop) fails instead of reporting.

The work, aligned with trinity's resolved settings (bench/peer.py passes them): `--prompts` x `--group`
completions per step, plaintext prompts or, with `--system-prompt`, chat prompts rendered by the model's
template, sampling at `--temperature` (no top-k/top-p; logprobs taken at the same temperature), at most
`--max-tokens` new tokens, trinity's math_reward (`--format-bonus`), group-normalised advantages (eps 1e-6),
one PPO-clip update per batch (eps 0.2, token-mean over the batch), k2 KL to the initial model with
coefficient `--kl-coef` (0: no reference model), AdamW (`--lr`, weight decay 0.01, grad-norm clip 1.0,
constant lr), float32, `--threads` torch threads.

    python bench/peer_loops.py bare|trl --model-dir DIR --data FILE --steps N [--prompts 16] [--group 8]
                                        [--max-tokens 8] [--lr 5e-5] [--system-prompt TEXT] [--temperature 1]
                                        [--kl-coef 0.001] [--format-bonus 0.1] [--threads 2]
"""

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from peer_envs import FOREIGN

CLIP, WEIGHT_DECAY = 0.2, 0.01
REWARDS = Path(__file__).resolve().parents[1] / "trinity" / "explorer" / "rewards.py"


def _load_math_reward():
    spec = importlib.util.spec_from_file_location("trinity_rewards_source", REWARDS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.math_reward


math_reward = _load_math_reward()


def messages(row: dict, system_prompt: str) -> list:
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": row["question"]}]


def prompt_text(tokenizer, row: dict, system_prompt) -> str:
    """The question itself, or with a system prompt, the chat rendered by the model's template."""
    if system_prompt is None:
        return row["question"]
    return tokenizer.apply_chat_template(messages(row, system_prompt), tokenize=False, add_generation_prompt=True)


def reward_of(text: str, truth: str, args) -> float:
    return math_reward(text, truth, format_bonus=args.format_bonus)["reward"]


def check_clean(loop: str) -> None:
    """Fail when the process holds a module of another stack: its figures would not be this peer's."""
    loaded = sorted(name for name in FOREIGN[loop] if name in sys.modules)
    if loaded:
        raise SystemExit(f"the {loop} baseline's process imported {loaded}: run it in its own environment")


def rows_of(path: str, steps: int, prompts: int) -> list:
    rows = [json.loads(line) for line in open(path)]
    needed = steps * prompts
    return (rows * (needed // len(rows) + 1))[:needed]


def report(step: int, reward: float) -> None:
    print(json.dumps({"step": step, "t": time.time(), "reward": reward}), flush=True)


def bare(args) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    policy = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32)
    reference = None
    if args.kl_coef:
        reference = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, weight_decay=WEIGHT_DECAY)
    eos = policy.generation_config.eos_token_id
    rows = rows_of(args.data, args.steps, args.prompts)
    group = args.group
    for step in range(args.steps):
        batch = rows[step * args.prompts : (step + 1) * args.prompts]
        prompts = tokenizer(
            [prompt_text(tokenizer, r, args.system_prompt) for r in batch],
            return_tensors="pt",
            padding=True,
            padding_side="left",
            add_special_tokens=False,
        )
        policy.eval()
        with torch.no_grad():
            ids = policy.generate(
                **prompts,
                do_sample=True,
                temperature=args.temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=args.max_tokens,
                num_return_sequences=group,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=eos,
            )
        prompt_len = prompts["input_ids"].shape[1]
        completion = ids[:, prompt_len:]
        ended = torch.isin(completion, torch.as_tensor(eos if isinstance(eos, list) else [eos]))
        mask = (ended.cumsum(1) - ended.long()) == 0  # up to and including the first stop token
        texts = tokenizer.batch_decode(completion.masked_fill(~mask, tokenizer.pad_token_id), skip_special_tokens=True)
        answers = [r["answer"] for r in batch for _ in range(group)]
        rewards = torch.tensor([reward_of(t, a, args) for t, a in zip(texts, answers, strict=True)])
        grouped = rewards.view(args.prompts, group)
        advantages = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)).view(-1)
        attention = torch.cat([prompts["attention_mask"].repeat_interleave(group, 0), mask.long()], dim=1)
        positions = (attention.cumsum(1) - 1).clamp(min=0)
        policy.train()
        logprobs = _token_logprobs(policy, ids, attention, positions, prompt_len, args.temperature)
        ratio = torch.exp(logprobs - logprobs.detach())
        surrogate = torch.minimum(ratio * advantages[:, None], ratio.clamp(1 - CLIP, 1 + CLIP) * advantages[:, None])
        per_token = -surrogate
        if reference is not None:
            with torch.no_grad():
                reference_logprobs = _token_logprobs(reference, ids, attention, positions, prompt_len, args.temperature)
            per_token = per_token + args.kl_coef * 0.5 * (logprobs - reference_logprobs) ** 2
        loss = (per_token * mask).sum() / mask.sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        check_clean("bare")
        report(step + 1, float(rewards.mean()))


def _token_logprobs(model, ids, attention, positions, prompt_len: int, temperature: float) -> torch.Tensor:
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=False).logits
    logits = logits[:, prompt_len - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, ids[:, prompt_len:, None]).squeeze(-1)


def trl(args) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class StepClock(TrainerCallback):
        def on_log(self, _args, state, _control, logs=None, **_kwargs):
            if logs and "reward" in logs:
                check_clean("trl")
                report(state.global_step, float(logs["reward"]))

    def reward(completions, answer, **_kwargs):
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]  # chat: the reply message
        return [reward_of(text, truth, args) for text, truth in zip(texts, answer, strict=True)]

    rows = rows_of(args.data, args.steps, args.prompts)
    prompt = (lambda r: r["question"]) if args.system_prompt is None else (lambda r: messages(r, args.system_prompt))
    dataset = Dataset.from_list([{"prompt": prompt(r), "answer": r["answer"]} for r in rows])
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir, padding_side="left")
    with tempfile.TemporaryDirectory() as output:
        config = GRPOConfig(
            output_dir=output,
            use_cpu=True,
            bf16=False,
            seed=0,
            max_steps=args.steps,
            logging_steps=1,
            per_device_train_batch_size=args.prompts * args.group,
            num_generations=args.group,
            max_completion_length=args.max_tokens,
            temperature=args.temperature,
            top_k=0,
            top_p=1.0,
            beta=args.kl_coef,
            epsilon=CLIP,
            num_iterations=1,
            learning_rate=args.lr,
            weight_decay=WEIGHT_DECAY,
            max_grad_norm=1.0,
            lr_scheduler_type="constant",
            gradient_checkpointing=False,
            shuffle_dataset=False,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
        )
        trainer = GRPOTrainer(
            model=args.model_dir, reward_funcs=reward, args=config, train_dataset=dataset, processing_class=tokenizer
        )
        trainer.add_callback(StepClock())
        trainer.train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loop", choices=["bare", "trl"])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--data", required=True, help="a jsonl file of {question, answer} rows")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="completions per prompt")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--system-prompt", help="render chat prompts (system + question) with the model's template")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--kl-coef", type=float, default=0.001, help="k2 KL coefficient; 0 loads no reference")
    parser.add_argument("--format-bonus", type=float, default=0.1, help="math_reward's bonus for a well-formed answer")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    {"bare": bare, "trl": trl}[args.loop](args)


if __name__ == "__main__":
    main()
