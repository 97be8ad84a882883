"""The `trinity` console script: `trinity studio ...` serves the Studio, `trinity convert gguf FILE OUT_DIR`
converts a llama.cpp GGUF model into an HF directory; anything else is the Hydra app of `python -m trinity`
(same arguments, same behaviour)."""

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "studio":
        from trinity.studio.launch import main as studio

        raise SystemExit(studio(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "convert":
        raise SystemExit(convert(sys.argv[2:]))
    from trinity.__main__ import entry as hydra_app

    hydra_app()


def convert(argv: list) -> int:
    """`trinity convert gguf FILE OUT_DIR`: write FILE's model as a float32 HF directory that
    `model.model_path=OUT_DIR` trains (and vLLM serves)."""
    import argparse

    parser = argparse.ArgumentParser(prog="trinity convert", description=convert.__doc__)
    parser.add_argument("format", choices=["gguf"], help="the input format (llama.cpp's GGUF)")
    parser.add_argument("file", help="the GGUF file")
    parser.add_argument("out_dir", help="a new directory for the HF model")
    args = parser.parse_args(argv)
    from trinity.model.gguf import GGUFError, convert_gguf

    try:
        out = convert_gguf(args.file, args.out_dir)
    except GGUFError as exc:
        print(f"trinity convert: {exc}", file=sys.stderr)
        return 1
    print(f"converted {args.file} -> {out} (train it with model.model_path={out})")
    return 0


if __name__ == "__main__":
    main()
