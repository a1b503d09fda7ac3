"""Which Tessera a process is: its version and the git commit it was built from.

Why: `0.1.0` alone names every build of a release line; during a rolling upgrade, an HA pair or a
rollback the operator has to tell which code a replica runs (`tessera --version`, the
`tessera.starting` log line and the `tessera_build_info` metric, as kube-scheduler's
`kubernetes_build_info`).

Where the commit comes from, first found wins:

1. a source checkout (the package's parent directory holds `.git`: a clone, a worktree, an
   editable install): `git rev-parse HEAD`, and `git status` for whether the tree has uncommitted
   changes — the code that runs is the checkout's, whatever was installed before;
2. `scheduler/data/build-commit`, written by the image build (`docker build --build-arg
   GIT_COMMIT=$(git rev-parse HEAD)`, see the Dockerfile): the commit and the tree state, one a line;
3. otherwise "unknown" (a wheel built without it).
"""

from __future__ import annotations

import argparse
import functools
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from scheduler import __version__

UNKNOWN = "unknown"
BUILD_COMMIT_FILE = "build-commit"  # in scheduler/data/, written by the image build
_COMMIT = re.compile(r"[0-9a-f]{40}")
_TREE_STATES = frozenset({"clean", "dirty"})
_GIT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class BuildInfo:
    version: str
    git_commit: str  # 40 hex digits, or "unknown"
    git_tree_state: str  # "clean", "dirty" (uncommitted changes) or "unknown"

    def describe(self) -> str:
        """One line for `--version`: `0.1.0 (commit <sha>)`, `, uncommitted changes` when dirty."""
        dirty = ", uncommitted changes" if self.git_tree_state == "dirty" else ""
        return f"{self.version} (commit {self.git_commit}{dirty})"

    def labels(self) -> dict[str, str]:
        """The `tessera_build_info` labels: upstream's `kubernetes_build_info` names for what a
        Python program can know (git_version, git_commit, git_tree_state; python_version and
        platform where upstream has go_version and platform)."""
        return {"git_version": self.version, "git_commit": self.git_commit, "git_tree_state": self.git_tree_state,
                "python_version": platform.python_version(),
                "platform": f"{platform.system().lower()}/{platform.machine().lower()}"}


@functools.cache
def build_info() -> BuildInfo:
    """This process's build (read once)."""
    return read_build_info(Path(__file__).resolve().parent)


def read_build_info(package: Path) -> BuildInfo:
    """The build of the `scheduler` package in directory `package`."""
    checkout = package.parent
    if (checkout / ".git").exists():
        commit = _git(checkout, "rev-parse", "HEAD")
        if commit is not None and _COMMIT.fullmatch(commit):
            status = _git(checkout, "status", "--porcelain", "--untracked-files=no")
            state = UNKNOWN if status is None else "dirty" if status else "clean"
            return BuildInfo(__version__, commit, state)
    return BuildInfo(__version__, *_recorded(package / "data" / BUILD_COMMIT_FILE))


def add_version_option(parser: argparse.ArgumentParser, program: str) -> None:
    """`--version`: `<program> <version> (commit <sha>)`. The commit is read only when asked for
    (it may run git), not on every start."""

    class Version(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                     option_string: str | None = None) -> None:
            print(f"{program} {build_info().describe()}")
            parser.exit()

    parser.add_argument("--version", action=Version, nargs=0, help="print the version and git commit, and exit")


def _recorded(path: Path) -> tuple[str, str]:
    """The commit and tree state the image build wrote; "unknown" for what is missing or malformed."""
    try:
        lines = path.read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return UNKNOWN, UNKNOWN
    commit = lines[0].lower() if lines and _COMMIT.fullmatch(lines[0].lower()) else UNKNOWN
    state = lines[1] if len(lines) > 1 and lines[1] in _TREE_STATES else UNKNOWN
    return commit, state


def _git(checkout: Path, *args: str) -> str | None:
    """`git -C checkout args…`'s output, stripped; None when git is missing, fails or hangs."""
    try:
        done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True,
                              timeout=_GIT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
