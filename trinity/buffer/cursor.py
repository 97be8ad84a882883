"""Which rows of a finite dataset make up each batch, and where reading stands (`current_index`).

Train mode serves only full batches. With `total_steps` it serves exactly that many batches, wrapping
around the dataset as often as needed (epochs are then ignored); otherwise it serves the full batches
that fit in `total_epochs` passes. Batches cross epoch boundaries: row = position mod dataset size.
Eval mode reads one pass, the last batch possibly short.
"""

from dataclasses import dataclass
from typing import Optional

from trinity.buffer.errors import BufferExhausted


@dataclass
class BatchCursor:
    dataset_size: int
    total_epochs: int = 1
    total_steps: Optional[int] = None
    eval_mode: bool = False
    current_index: int = 0  # positions served so far

    def __post_init__(self) -> None:
        if self.dataset_size < 1:
            raise ValueError("the dataset is empty")

    def total(self, batch_size: int) -> int:
        """How many positions this reader serves in all."""
        if self.eval_mode:
            return self.dataset_size
        if self.total_steps is not None:
            return self.total_steps * batch_size
        full_batches = self.dataset_size * self.total_epochs // batch_size
        return full_batches * batch_size

    def next_positions(self, batch_size: int) -> range:
        """Positions of the next batch (row = position % dataset_size, epoch = position // dataset_size);
        advances the cursor. Raises BufferExhausted at the end."""
        end = min(self.current_index + batch_size, self.total(batch_size))
        if end <= self.current_index or (not self.eval_mode and end - self.current_index < batch_size):
            raise BufferExhausted(f"all {self.total(batch_size)} samples were read")
        positions = range(self.current_index, end)
        self.current_index = end
        return positions

    def state_dict(self) -> dict:
        return {"current_index": self.current_index}

    def load_state_dict(self, state: dict) -> None:
        index = int(state.get("current_index", 0))
        if index < 0:
            raise ValueError(f"current_index must be >= 0, got {index}")
        self.current_index = index
