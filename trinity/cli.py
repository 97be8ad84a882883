"""The `trinity` console script: `trinity studio ...` serves the Studio; anything else is the Hydra app
of `python -m trinity` (same arguments, same behaviour)."""

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "studio":
        from trinity.studio.launch import main as studio

        raise SystemExit(studio(sys.argv[2:]))
    from trinity.__main__ import entry as hydra_app

    hydra_app()


if __name__ == "__main__":
    main()
