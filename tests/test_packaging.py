"""Hydra finds the trinity_ray launcher, and trinity finds conf/, from an editable and a wheel install.

A flat-layout PEP 660 editable install would hide `hydra_plugins` from Hydra's scan; pyproject's
`package-dir = {"" = "."}` makes setuptools write a plain .pth instead. These tests run the app in
a subprocess outside the repository, where the working directory cannot mask a broken install.
"""

import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli


def test_editable_install_exposes_the_launcher_to_hydra(tmp_path):
    result = run_cli("--info", "plugins", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    launchers = result.stdout.split("Launcher:")[1].split("Sweeper:")[0]
    assert "TrinityRayLauncher" in launchers


def test_the_editable_install_is_a_plain_path_entry():
    pth = [p for d in site.getsitepackages() for p in Path(d).glob("__editable__*trinity*.pth")]
    if not pth:
        pytest.skip("trinity is not installed editable here; the wheel test covers discovery")
    assert pth[0].read_text().strip() == str(REPO), "editable install uses an import hook Hydra cannot scan"


def test_wheel_in_a_fresh_venv_finds_the_launcher_and_the_config_tree(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("trinity-*.whl")
    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    fresh_site = Path(
        subprocess.check_output([python, "-c", "import site; print(site.getsitepackages()[0])"], text=True).strip()
    )
    # dependencies come from this environment's site-packages; trinity itself only from the wheel
    (fresh_site / "deps.pth").write_text(site.getsitepackages()[0] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(fresh_site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )

    def run(*args):
        return subprocess.run([python, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)

    where = run("-c", "import trinity, trinity.config as c; print(trinity.__file__); print(c.CONF_DIR)")
    assert where.returncode == 0, where.stderr
    module_file, conf_dir = where.stdout.split()
    assert module_file.startswith(str(fresh_site)) and conf_dir.startswith(str(fresh_site))
    assert (Path(conf_dir) / "config.yaml").is_file() and (Path(conf_dir) / "algorithm" / "grpo.yaml").is_file()
    plugins = run("-m", "trinity", "--info", "plugins")
    assert "TrinityRayLauncher" in plugins.stdout, plugins.stderr
    dry = run("-m", "trinity", "algorithm=ppo", "dry_run=true", f"checkpoint_root_dir={tmp_path}")
    assert dry.returncode == 0, dry.stderr
    assert "Config is valid" in dry.stdout
