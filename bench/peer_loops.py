"""The two single-process baselines of bench/peer.py, each run as its own process: a minimal GRPO loop in plain
torch (`bare`) and TRL's GRPOTrainer (`trl`, the `bench` extra). Both do trinity's default GRPO work on the
model and data bench/peer.py prepares, and print one JSON line per finished step: {"step", "t", "reward"}.

The work, aligned with `python -m trinity stages=[]`: 16 prompts x 8 completions per step, plaintext arithmetic
prompts, sampling at temperature 1 (no top-k/top-p), at most `--max-tokens` new tokens, trinity's math_reward,
group-normalised advantages (eps 1e-6), one PPO-clip update per batch (eps 0.2, token-mean over the batch),
k2 KL to the initial model with coefficient 0.001, AdamW (lr 5e-5, weight decay 0.01, grad-norm clip 1.0,
constant lr), float32, `--threads` torch threads.

    python bench/peer_loops.py bare|trl --model-dir DIR --data FILE --steps N [--threads 2] [--max-tokens 8]
"""

import argparse
import json
import tempfile
import time

import torch

from trinity.explorer.rewards import math_reward

PROMPTS, GROUP, LR, KL_COEF, CLIP, WEIGHT_DECAY = 16, 8, 5e-5, 0.001, 0.2, 0.01


def rows_of(path: str, steps: int) -> list:
    rows = [json.loads(line) for line in open(path)]
    needed = steps * PROMPTS
    return (rows * (needed // len(rows) + 1))[:needed]


def report(step: int, reward: float) -> None:
    print(json.dumps({"step": step, "t": time.time(), "reward": reward}), flush=True)


def bare(args) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    policy = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32)
    reference = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    eos = policy.generation_config.eos_token_id
    rows = rows_of(args.data, args.steps)
    for step in range(args.steps):
        batch = rows[step * PROMPTS : (step + 1) * PROMPTS]
        prompts = tokenizer([r["question"] for r in batch], return_tensors="pt", padding=True, padding_side="left")
        policy.eval()
        with torch.no_grad():
            ids = policy.generate(**prompts, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                  max_new_tokens=args.max_tokens, num_return_sequences=GROUP,
                                  pad_token_id=tokenizer.pad_token_id, eos_token_id=eos)  # fmt: skip
        prompt_len = prompts["input_ids"].shape[1]
        completion = ids[:, prompt_len:]
        ended = torch.isin(completion, torch.as_tensor(eos if isinstance(eos, list) else [eos]))
        mask = (ended.cumsum(1) - ended.long()) == 0  # up to and including the first stop token
        texts = tokenizer.batch_decode(completion.masked_fill(~mask, tokenizer.pad_token_id), skip_special_tokens=True)
        answers = [r["answer"] for r in batch for _ in range(GROUP)]
        rewards = torch.tensor([math_reward(t, a)["reward"] for t, a in zip(texts, answers, strict=True)])
        grouped = rewards.view(PROMPTS, GROUP)
        advantages = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)).view(-1)
        attention = torch.cat([prompts["attention_mask"].repeat_interleave(GROUP, 0), mask.long()], dim=1)
        positions = (attention.cumsum(1) - 1).clamp(min=0)
        policy.train()
        logprobs = _token_logprobs(policy, ids, attention, positions, prompt_len)
        with torch.no_grad():
            reference_logprobs = _token_logprobs(reference, ids, attention, positions, prompt_len)
        ratio = torch.exp(logprobs - logprobs.detach())
        surrogate = torch.minimum(ratio * advantages[:, None], ratio.clamp(1 - CLIP, 1 + CLIP) * advantages[:, None])
        kl = 0.5 * (logprobs - reference_logprobs) ** 2
        loss = ((-surrogate + KL_COEF * kl) * mask).sum() / mask.sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        report(step + 1, float(rewards.mean()))


def _token_logprobs(model, ids, attention, positions, prompt_len: int) -> torch.Tensor:
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=False).logits
    logits = logits[:, prompt_len - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, ids[:, prompt_len:, None]).squeeze(-1)


def trl(args) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class StepClock(TrainerCallback):
        def on_log(self, _args, state, _control, logs=None, **_kwargs):
            if logs and "reward" in logs:
                report(state.global_step, float(logs["reward"]))

    def reward(completions, answer, **_kwargs):
        return [math_reward(text, truth)["reward"] for text, truth in zip(completions, answer, strict=True)]

    rows = rows_of(args.data, args.steps)
    dataset = Dataset.from_list([{"prompt": r["question"], "answer": r["answer"]} for r in rows])
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir, padding_side="left")
    with tempfile.TemporaryDirectory() as output:
        config = GRPOConfig(
            output_dir=output, use_cpu=True, bf16=False, seed=0, max_steps=args.steps, logging_steps=1,
            per_device_train_batch_size=PROMPTS * GROUP, num_generations=GROUP, max_completion_length=args.max_tokens,
            temperature=1.0, top_k=0, top_p=1.0, beta=KL_COEF, epsilon=CLIP, num_iterations=1,
            learning_rate=LR, weight_decay=WEIGHT_DECAY, max_grad_norm=1.0, lr_scheduler_type="constant",
            gradient_checkpointing=False, shuffle_dataset=False, save_strategy="no", report_to="none",
            disable_tqdm=True,
        )  # fmt: skip
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
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    {"bare": bare, "trl": trl}[args.loop](args)


if __name__ == "__main__":
    main()
