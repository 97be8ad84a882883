"""The trainer: FSDP2 ranks that learn from experience batches, and the controller that drives them."""
