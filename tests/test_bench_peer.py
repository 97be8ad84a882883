"""bench/peer.py compares like with like: the baselines' hard-coded GRPO settings are trinity's resolved ones
for every model of the bench, and a baseline's process holding another stack's module refuses to report."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import validated

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import peer  # noqa: E402
import peer_loops  # noqa: E402


@pytest.mark.parametrize("model", sorted(peer.MODELS))
def test_the_baselines_do_the_work_of_trinitys_resolved_config(model, smollm2_cache, tmp_path):
    cache = [f"model.gguf.cache_dir={smollm2_cache}"] if model == "smollm2" else []
    work = peer.work_of(validated(*peer.MODELS[model], *cache, root=str(tmp_path)).configs[0])
    # passed to the loops as arguments
    assert work["prompts"] >= 1 and work["group"] >= 2 and work["max_tokens"] >= 1 and work["lr"] > 0
    assert 0 < work["temperature"] <= 1 and work["kl_coef"] >= 0 and work["format_bonus"] >= 0
    # hard-coded in the loops
    assert (work["top_p"], work["top_k"]) == (1.0, -1), "the loops sample without top-k or top-p"
    assert work["kl_loss_fn"] in ("k2", "none"), "the loops' KL term is k2 (or none)"
    assert work["clip"] == peer_loops.CLIP and work["loss_agg_mode"] == "token-mean"
    assert work["advantage_epsilon"] == 1e-6 and work["weight_decay"] == peer_loops.WEIGHT_DECAY
    assert (work["lr_scheduler"], work["grad_clip"], work["ppo_epochs"]) == ("constant", 1.0, 1)
    assert (work["system_prompt"] is not None) == (model == "smollm2"), "chat prompts only for the real model"


def test_a_baseline_holding_another_stacks_module_refuses_to_report():
    code = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); import trinity.config; import peer_loops; "
        "peer_loops.check_clean('bare')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "the bare baseline's process imported ['trinity']" in result.stderr
