"""Process-group plumbing shared by the trainer ranks: one code path for CPU (gloo) and CUDA (nccl)."""

import datetime
import os
import socket

import torch
import torch.distributed as dist


def collective_backend(device_type: str) -> str:
    return "nccl" if device_type == "cuda" else "gloo"


def free_port() -> int:
    """A TCP port that is free on this host right now (for a process group's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def node_address() -> str:
    """This node's IP as Ray sees it (falls back to localhost outside Ray)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.util.get_node_ip_address()
    except ImportError:  # pragma: no cover - ray is a dependency
        pass
    return "127.0.0.1"


def init_group(rank: int, world_size: int, master_address: str, master_port: int, device_type: str, timeout_s: float):
    """Join the trainer's default process group; returns the torch device this rank computes on."""
    if device_type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if world_size == 1 and dist.is_initialized() and dist.get_world_size() == 1:
        return device  # colocate: the vllm engine of this process formed the one-process group already
    dist.init_process_group(
        collective_backend(device_type),
        init_method=f"tcp://{master_address}:{master_port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return device
