"""The explorer's parts: rollout engines (transformers generate; vLLM later), workflows that turn a
task into scored experiences, reward functions, and the runner that drives a batch of tasks over the
engines with retries and timeouts.

Importing this package (and `trinity.explorer.registry`) does not import torch, so validation can
check workflow and reward names before Ray starts.
"""
