"""The functions' image as Google Cloud's buildpacks make it, on this machine (the rehearsal's,
tools/rehearse_deploy.py):

- the application: the bundle unpacked, the working directory of every process;
- its dependencies: a fresh virtualenv holding the bundle's `requirements.txt` and nothing else
  (hash-checked, as pip installs a file with hashes); the checkout is nowhere on its path;
- `python3 -m compileall -f -q .` over the application, as the buildpack runs it (a syntax error
  fails the build; this is the only bytecode the image has);
- the launch environment: the venv's python first on PATH, and FUNCTION_TARGET /
  FUNCTION_SIGNATURE_TYPE as the image's defaults (infra/deploy/cloudbuild.yaml), which a service's
  own setting overrides;
- the launcher: a job's `command = ["/cnb/lifecycle/launcher"]` runs its args in that environment;
  a service with no command runs the web process, `functions-framework`.

The virtualenv is kept in .local/ between runs, named by what it holds (the requirements, this
Python, the connector's stand-in): a changed requirements.txt makes a fresh one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

from rehearsal_plan import Container

ROOT = Path(__file__).resolve().parents[1]
CONNECTOR = Path(__file__).resolve().parent / "rehearsal_connector.py"
LAUNCHER = "/cnb/lifecycle/launcher"
WEB_PROCESS = ["functions-framework"]  # the Python functions buildpack's web process
CLOUDBUILD = ROOT / "infra" / "deploy" / "cloudbuild.yaml"
SYSTEM_PATH = "/usr/bin:/bin"


class ImageError(RuntimeError):
    """The image cannot be made, or a command cannot run in it; one line."""


@dataclass(frozen=True)
class Image:
    app: Path
    venv: Path
    default_target: str  # FUNCTION_TARGET baked into the image (the plan's output build.function_target)

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python3"

    def environment(self, settings: dict[str, str]) -> dict[str, str]:
        """The launch environment a container starts with, its own settings over the image's defaults."""
        return {
            "PATH": f"{self.venv / 'bin'}:{SYSTEM_PATH}",
            "HOME": str(self.app.parent / "home"),
            "LANG": "C.UTF-8",
            "FUNCTION_TARGET": self.default_target,
            "FUNCTION_SIGNATURE_TYPE": "http",
            **settings,
        }

    def run(self, argv: list[str], settings: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        """One process in the image: the application directory, the launch environment, output captured."""
        return subprocess.run(
            argv,
            cwd=self.app,
            env=self.environment(settings),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def argv(self, container: Container) -> list[str]:
        """What the launcher runs for this container."""
        if container.command == (LAUNCHER,):
            argv = list(container.args)
        elif not container.command and not container.args:
            argv = list(WEB_PROCESS)
        else:
            raise ImageError(
                f"{container.label()}: command {list(container.command)} args {list(container.args)}: the rehearsal "
                f"runs the image's launcher ({LAUNCHER}) or its web process only"
            )
        found = shutil.which(argv[0], path=f"{self.venv / 'bin'}:{SYSTEM_PATH}")
        if found is None:
            raise ImageError(f"{container.label()}: {argv[0]} is not in the image")
        return [found, *argv[1:]]


def unpack(bundle: Path, app: Path) -> None:
    shutil.rmtree(app, ignore_errors=True)
    app.mkdir(parents=True)
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(app)
    (app.parent / "home").mkdir(exist_ok=True)


def image_python_version() -> str:
    """The Python the image is built with (cloudbuild.yaml's GOOGLE_PYTHON_VERSION, e.g. 3.11)."""
    found = re.search(r"GOOGLE_PYTHON_VERSION=(\d+\.\d+)", CLOUDBUILD.read_text())
    return found.group(1) if found else "unknown"


def virtualenv(requirements: Path, cache: Path, log=print) -> Path:
    """A virtualenv with `requirements` alone installed, and the connector's stand-in (rehearsal_connector.py)."""
    key = hashlib.sha256(requirements.read_bytes() + sys.version.encode() + CONNECTOR.read_bytes()).hexdigest()[:16]
    env_dir = cache / f"venv-{key}"
    done = env_dir / ".complete"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs in one checkout build it once
        if done.exists():
            return env_dir
        for old in cache.glob("venv-*"):
            shutil.rmtree(old, ignore_errors=True)
        log(f"installing the bundle's requirements.txt into a fresh virtualenv ({env_dir})")
        venv.EnvBuilder(with_pip=True).create(env_dir)
        python = env_dir / "bin" / "python3"
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-input"]
        done_pip = subprocess.run(
            [*pip, "-r", str(requirements)], capture_output=True, text=True, timeout=1200, check=False
        )
        if done_pip.returncode != 0:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise ImageError(f"pip install -r requirements.txt failed: {done_pip.stderr.strip()[-400:]}")
        [site] = env_dir.glob("lib/python3*/site-packages")
        shutil.copyfile(CONNECTOR, site / CONNECTOR.name)
        (site / "rehearsal-connector.pth").write_text("import rehearsal_connector\n")
        done.touch()
    return env_dir


def build(bundle: Path, work: Path, cache: Path, default_target: str, log=print) -> Image:
    """Unpack, install, compile: the image, ready to launch jobs and services."""
    app = work / "app"
    unpack(bundle, app)
    env_dir = virtualenv(app / "requirements.txt", cache, log)
    image = Image(app, env_dir, default_target)
    compiled = image.run([str(image.python), "-m", "compileall", "-f", "-q", "."], {}, timeout=300)
    if compiled.returncode != 0:
        raise ImageError(f"image build: compileall failed: {(compiled.stdout + compiled.stderr).strip()[-400:]}")
    _check_isolated(image)
    return image


_PROBE = """
import importlib.metadata, json, sys
import main, signup_verification
try:
    importlib.metadata.version("signup-verification")
    installed = True
except importlib.metadata.PackageNotFoundError:
    installed = False
print(json.dumps({"package": signup_verification.__file__, "path": sys.path, "installed": installed}))
"""


def _check_isolated(image: Image) -> None:
    """The application imports from the bundle alone: not from the checkout, not as an installed package."""
    probe = image.run([str(image.python), "-c", _PROBE], {"ENVIRONMENT": "production"}, timeout=120)
    if probe.returncode != 0:
        raise ImageError(f"image: main.py does not import: {probe.stderr.strip().splitlines()[-1:]}")
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    checkout = [p for p in found["path"] if p and (ROOT / "shared").is_relative_to(Path(p).resolve())]
    if found["installed"] or checkout or not Path(found["package"]).resolve().is_relative_to(image.app.resolve()):
        raise ImageError(f"image: the package does not come from the bundle alone: {found}")


def environ_note() -> str | None:
    """Said when this machine's Python is not the image's."""
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    theirs = image_python_version()
    return None if mine == theirs else f"Python {mine} here, {theirs} in the image (infra/deploy/cloudbuild.yaml)"
