"""The image and the pods that run it, checked statically (issues 4 and 6).

There is no container engine on the development and CI machines, so the Dockerfile is checked by
reading it: pinned base image, numeric non-root user, exec-form entrypoint, no secrets, installs
pinned to deploy/requirements.lock. The same file checks what the deploy/ manifests promise about
the pods (non-root with the image's uid, read-only root filesystem, no capabilities, probes on the
served port) and about RBAC and the admission policy, because those promises only hold together
with the image (e.g. `runAsNonRoot` needs the numeric USER).

The build itself is rehearsed by hand, without Docker, with the same steps and pins:

    .venv/bin/python tests/unit/test_dockerfile.py --simulate-build

and the lock file is regenerated from the project's virtualenv with:

    .venv/bin/python tests/unit/test_dockerfile.py --write-lock
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
LOCK = REPO / "deploy" / "requirements.lock"
DEPLOY = REPO / "deploy"
IMAGE_UID = 65532

Obj = dict[str, Any]


# --- reading the Dockerfile ------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    stage: int  # index of the FROM it belongs to (-1 before the first FROM)


def instructions(text: str | None = None) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    text = DOCKERFILE.read_text() if text is None else text
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    result = []
    stage = -1
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        result.append(Instruction(keyword, args.strip(), stage))
    return result


def build_args() -> dict[str, str]:
    args = {}
    for ins in instructions():
        if ins.keyword == "ARG" and "=" in ins.args:
            name, _, value = ins.args.partition("=")
            args[name.strip()] = value.strip()
    return args


def final_stage() -> list[Instruction]:
    all_ins = instructions()
    last = max(ins.stage for ins in all_ins)
    return [ins for ins in all_ins if ins.stage == last]


def env_of(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in stage:
        if ins.keyword == "ENV":
            for token in shlex.split(ins.args):
                name, _, value = token.partition("=")
                env[name] = value
    return env


def run_commands() -> list[list[str]]:
    """Each shell command of each RUN (split on &&), as argv."""
    commands = []
    for ins in instructions():
        if ins.keyword == "RUN":
            for part in ins.args.split("&&"):
                commands.append(shlex.split(part))
    return commands


def pip_installs() -> list[list[str]]:
    installs = []
    for argv in run_commands():
        if "pip" in (Path(argv[0]).name if argv else "") and "install" in argv:
            installs.append(argv)
    return installs


def build_tool_pins() -> dict[str, str]:
    """`pip install name==version ...` of the build stage (the wheel's build backend)."""
    pins: dict[str, str] = {}
    for argv in pip_installs():
        for arg in argv:
            if "==" in arg and not arg.startswith("-"):
                name, _, version = arg.partition("==")
                pins[canonicalize_name(name)] = version
    return pins


def read_lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in LOCK.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", line)
        assert match, f"requirements.lock: not an exact pin: {line!r}"
        name = canonicalize_name(match.group(1))
        assert name not in pins, f"requirements.lock pins {name} twice"
        pins[name] = match.group(2)
    return pins


def pyproject() -> Obj:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def dockerignore_includes() -> list[str]:
    lines = [l.strip() for l in DOCKERIGNORE.read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert lines[0] == "*", ".dockerignore must start by excluding everything (an allow-list)"
    return [l[1:].rstrip("/") for l in lines if l.startswith("!")]


# --- reading deploy/ ---------------------------------------------------------------------------------


def deploy_docs() -> list[Obj]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    docs = []
    for entry in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((DEPLOY / entry).read_text()) if isinstance(d, dict)]
    return docs


def find(kind: str, name: str) -> Obj:
    for doc in deploy_docs():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"{kind} {name}")


def container(workload: Obj) -> Obj:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


# --- the Dockerfile ------------------------------------------------------------------------------------


def test_base_image_is_pinned_to_a_patch_release() -> None:
    args = build_args()
    image = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+", image), image
    stages: list[str] = []
    for ins in instructions():
        if ins.keyword != "FROM":
            continue
        ref, _, alias = ins.args.partition(" AS ")
        ref = ref.strip()
        assert ref == "${PYTHON_IMAGE}" or ref in stages, f"unpinned or unknown base {ref!r}"
        if alias:
            stages.append(alias.strip())
    assert "latest" not in DOCKERFILE.read_text().lower()


def test_multi_stage_final_image_has_only_the_venv() -> None:
    stages = {ins.stage for ins in instructions()}
    assert len(stages) >= 2, "build in one stage, copy the result into a clean one"
    copies = [ins.args for ins in final_stage() if ins.keyword in ("COPY", "ADD")]
    assert copies == ["--from=build /opt/tessera /opt/tessera"], copies
    assert not [ins for ins in final_stage() if ins.keyword == "RUN"], "the final stage runs nothing at build time"


def test_final_stage_runs_as_the_numeric_non_root_user() -> None:
    users = [ins.args for ins in final_stage() if ins.keyword == "USER"]
    assert users and users[-1] == f"{IMAGE_UID}:{IMAGE_UID}", users
    # Numeric, so the kubelet can verify `runAsNonRoot` without reading /etc/passwd.
    assert all(part.isdigit() and int(part) != 0 for part in users[-1].split(":"))


def test_entrypoint_is_the_tessera_command_in_exec_form() -> None:
    entrypoints = [ins.args for ins in final_stage() if ins.keyword == "ENTRYPOINT"]
    assert entrypoints and json.loads(entrypoints[-1]) == ["tessera"]
    assert pyproject()["project"]["scripts"]["tessera"] == "scheduler.cli:main"
    from scheduler.cli import build_parser

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices  # noqa: SLF001
    assert commands is not None and {"run", "agent"} <= set(commands)


def test_manifest_command_lines_are_accepted_by_the_cli() -> None:
    """The Deployment's and the DaemonSet's args parse with the real `tessera` parser (the
    kubelet substitutes $(NODE_NAME) from the env before exec)."""
    from scheduler.cli import build_parser

    run = build_parser().parse_args(container(find("Deployment", "tessera-scheduler"))["args"])
    assert (run.command, run.bind_address, run.secure_port, run.config) == ("run", "0.0.0.0", 10259,
                                                                           "/etc/tessera/config.yaml")
    args = [a.replace("$(NODE_NAME)", "gpu-node-1") for a in container(find("DaemonSet", "tessera-agent"))["args"]]
    agent = build_parser().parse_args(args)
    assert (agent.command, agent.node_name, agent.backend) == ("agent", "gpu-node-1", "nvml")
    mounts = {m["mountPath"] for m in container(find("DaemonSet", "tessera-agent"))["volumeMounts"]}
    assert agent.device_plugin_dir in mounts, "the agent's sockets and state file live on the hostPath"


def test_nothing_is_written_at_run_time() -> None:
    env = env_of(final_stage())
    assert env.get("PYTHONDONTWRITEBYTECODE") == "1"
    assert env.get("PATH", "").startswith("/opt/tessera/bin:")
    assert any(argv[1:3] == ["-m", "compileall"] for argv in run_commands() if len(argv) > 2), \
        "bytecode is compiled at build time"


def test_no_secrets_enter_the_image() -> None:
    text = DOCKERFILE.read_text()
    for ins in instructions():
        if ins.keyword in ("ENV", "ARG", "LABEL"):
            assert not re.search(r"(?i)(token|passw|secret|api[_-]?key|credential)", ins.args), ins
        assert not (ins.keyword == "ADD" and "://" in ins.args), "ADD from a URL is unverified input"
    assert not re.search(r"--(extra-)?index-url|--trusted-host|://[^/\s]*:[^/\s]*@", text)
    # The build context is an allow-list; nothing in it looks like a credential.
    included = dockerignore_includes()
    assert set(included) <= {"pyproject.toml", "README.md", "scheduler", "deploy/requirements.lock", "LICENSE"}
    for entry in included:
        path = REPO / entry
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for file in files:
            assert not re.search(r"(?i)(\.pem|\.key|\.crt|kubeconfig|\.env)$", file.name), file


def test_every_copied_file_is_in_the_build_context() -> None:
    included = dockerignore_includes()
    for ins in instructions():
        if ins.keyword != "COPY" or ins.args.startswith("--from"):
            continue
        *sources, _ = ins.args.split()
        for source in sources:
            assert any(source == inc or source.startswith(inc + "/") for inc in included), source
            assert (REPO / source).exists(), source


def test_installs_are_pinned_and_leave_no_cache() -> None:
    installs = pip_installs()
    assert installs
    for argv in installs:
        assert "--no-cache-dir" in argv, argv
        packages = [a for a in argv[argv.index("install") + 1:] if not a.startswith("-")]
        requirement_files = [argv[i + 1] for i, a in enumerate(argv) if a in ("-r", "--requirement")]
        packages = [p for p in packages if p not in requirement_files]
        if requirement_files:
            assert requirement_files == ["/tmp/requirements.lock"], argv
            assert "--no-deps" in argv and "--only-binary=:all:" in argv, argv
        for package in packages:
            assert "==" in package or package.startswith("/wheels/"), f"unpinned install of {package}"
            if package.startswith("/wheels/"):
                assert "--no-deps" in argv, "the local wheel must not pull unlocked dependencies"
    assert any(argv[1:2] == ["--python"] and "check" in argv for argv in run_commands() if len(argv) > 1), \
        "`pip check` proves the locked set complete"


def test_image_labels_and_version() -> None:
    labels = " ".join(ins.args for ins in final_stage() if ins.keyword == "LABEL")
    version = pyproject()["project"]["version"]
    assert f'org.opencontainers.image.version="{version}"' in labels
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in labels
    assert build_args()["PYTHON_IMAGE"] in labels  # base.name tells scanners what to track


# --- the lock file ---------------------------------------------------------------------------------------


def test_lock_pins_every_runtime_dependency_within_its_range() -> None:
    pins = read_lock()
    for spec in pyproject()["project"]["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is a dependency but not in deploy/requirements.lock (see --write-lock)"
        assert requirement.specifier.contains(Version(pins[name]), prereleases=True), \
            f"requirements.lock pins {name}=={pins[name]}, outside {requirement.specifier}"
    assert "tessera-scheduler" not in pins
    assert list(pins) == sorted(pins), "keep the lock sorted (stable diffs)"


def imported_distributions() -> dict[str, set[str]]:
    """Distribution -> files of scheduler/ that import it (at module level or lazily): what the
    image must contain for every command to run, whatever pyproject.toml declares."""
    stdlib = set(sys.stdlib_module_names) | {"__future__", "scheduler"}
    owners = metadata.packages_distributions()
    found: dict[str, set[str]] = {}
    for path in (REPO / "scheduler").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in stdlib:
                    continue
                for dist in owners.get(top, [top]):
                    found.setdefault(canonicalize_name(dist), set()).add(str(path.relative_to(REPO)))
    return found


def runtime_closure() -> dict[str, str]:
    """name -> installed version of every runtime dependency, transitively: pyproject's
    dependencies plus every distribution scheduler/ imports, from the installed metadata (markers
    evaluated for this interpreter, no extras)."""
    seen: dict[str, str] = {}
    stack = list(pyproject()["project"]["dependencies"]) + sorted(imported_distributions())
    while stack:
        requirement = Requirement(stack.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        seen[name] = metadata.version(requirement.name)
        stack.extend(metadata.requires(requirement.name) or [])
    return dict(sorted(seen.items()))


def test_lock_covers_every_distribution_the_code_imports() -> None:
    """`tessera agent` imports grpc and pynvml, `tessera run` numpy, ...: a module missing from the
    image is a crash at start-up on the cluster, so every import must be pinned here."""
    pins = read_lock()
    missing = {dist: sorted(files)[:3] for dist, files in imported_distributions().items() if dist not in pins}
    assert not missing, f"imported but not in deploy/requirements.lock (run --write-lock): {missing}"


def write_lock() -> None:
    header = [line for line in LOCK.read_text().splitlines() if line.startswith("#")] if LOCK.exists() else []
    body = [f"{name}=={version}" for name, version in runtime_closure().items()]
    LOCK.write_text("\n".join(header + body) + "\n")
    print(f"wrote {len(body)} pins to {LOCK.relative_to(REPO)}")


# --- the pods ------------------------------------------------------------------------------------------------


def test_scheduler_pod_is_non_root_read_only_without_capabilities() -> None:
    deployment = find("Deployment", "tessera-scheduler")
    pod = deployment["spec"]["template"]["spec"]
    ctr = container(deployment)
    pod_sc, sc = pod["securityContext"], ctr["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] == IMAGE_UID
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == IMAGE_UID
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert not sc.get("privileged")
    assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    assert not any("hostPath" in volume for volume in pod.get("volumes", []))
    assert pod["serviceAccountName"] == "tessera-scheduler"


def test_scheduler_deployment_is_highly_available_and_probed() -> None:
    deployment = find("Deployment", "tessera-scheduler")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    ctr = container(deployment)
    assert spec["replicas"] == 2
    args = ctr["args"]
    assert args[0] == "run"
    # kube-scheduler's secure port: HTTPS with delegated authentication and authorization, no plain HTTP
    port = int(next(a for a in args if a.startswith("--secure-port=")).split("=", 1)[1])
    assert port == 10259 and not any(a.startswith("--port") for a in args)
    assert "--bind-address=0.0.0.0" in args
    config_path = next(a for a in args if a.startswith("--config=")).split("=", 1)[1]
    mount = next(m for m in ctr["volumeMounts"] if m["name"] == "config")
    assert config_path.startswith(mount["mountPath"] + "/") and mount["readOnly"] is True
    named = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert named["https"] == port
    assert ctr["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert ctr["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert {"cpu", "memory"} <= set(ctr["resources"]["requests"]) and "memory" in ctr["resources"]["limits"]
    terms = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    pdb = find("PodDisruptionBudget", "tessera-scheduler")
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    assert pdb["spec"]["minAvailable"] == 1
    service = find("Service", "tessera-scheduler-metrics")
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]


def test_agent_pod_is_unprivileged_with_only_the_device_plugin_directory() -> None:
    daemonset = find("DaemonSet", "tessera-agent")
    pod = daemonset["spec"]["template"]["spec"]
    ctr = container(daemonset)
    sc = ctr["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"] == {"drop": ["ALL"]}
    host_paths = [v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v]
    assert host_paths == ["/var/lib/kubelet/device-plugins"]
    assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    env = {e["name"]: e for e in ctr["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert ctr["args"][:2] == ["agent", "--node-name=$(NODE_NAME)"]
    assert pod["serviceAccountName"] == "tessera-agent"
    assert any(t.get("key") == "nvidia.com/gpu" for t in pod["tolerations"])


def test_images_are_tagged_with_the_project_version() -> None:
    version = pyproject()["project"]["version"]
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert {"name": "tessera", "newTag": version} in kustomization["images"]
    for kind, name in (("Deployment", "tessera-scheduler"), ("DaemonSet", "tessera-agent")):
        assert container(find(kind, name))["image"] == f"tessera:{version}"


# --- RBAC, configuration, admission policy -------------------------------------------------------------


def test_rbac_has_no_wildcards_and_no_dangerous_verbs() -> None:
    roles = [d for d in deploy_docs() if d["kind"] in ("Role", "ClusterRole")]
    assert roles
    for role in roles:
        for rule in role.get("rules", []):
            for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert "*" not in rule.get(key, []), (role["metadata"]["name"], rule)
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), role["metadata"]["name"]
            if role["metadata"]["name"].startswith(("tessera-scheduler", "tessera-agent")):
                assert not {"secrets", "configmaps", "serviceaccounts", "serviceaccounts/token"} & set(rule["resources"])


def test_configmap_config_is_valid_and_its_lease_matches_the_role() -> None:
    from scheduler.api.config import load_config

    configmap = find("ConfigMap", "tessera-scheduler-config")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as handle:
        handle.write(configmap["data"]["config.yaml"])
        handle.flush()
        config = load_config(handle.name)
    election = config.leader_election
    assert election.leader_elect
    role = find("Role", "tessera-scheduler-leader-election")
    assert role["metadata"]["namespace"] == election.resource_namespace == configmap["metadata"]["namespace"]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named and all(r["resourceNames"] == [election.resource_name] for r in named)
    assert "tessera" in config.scheduler_names


def test_admission_policy_exempts_exactly_the_deployed_service_accounts() -> None:
    policy = find("ValidatingAdmissionPolicy", "tessera-annotations")
    text = json.dumps(policy)
    named = set(re.findall(r"system:serviceaccount:([a-z0-9-]+):([a-z0-9-]+)", text))
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in deploy_docs() if d["kind"] == "ServiceAccount"}
    assert named == accounts == {("tessera-system", "tessera-scheduler"), ("tessera-system", "tessera-agent")}
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {"pods", "pods/*", "bindings"} <= {r for rule in rules for r in rule["resources"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    binding = find("ValidatingAdmissionPolicyBinding", "tessera-annotations")
    assert binding["spec"]["policyName"] == "tessera-annotations" and binding["spec"]["validationActions"] == ["Deny"]


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    listed = {DEPLOY / entry for entry in kustomization["resources"]}
    assert all(path.is_file() for path in listed)
    # deploy/helm holds the Helm chart (tests/unit/test_helm_chart.py keeps it equal to this tree);
    # deploy/apiserver the apiserver's side a cluster admin applies by hand
    # (tests/e2e/test_quota_admission.py); deploy/optional what needs the cluster's own values first
    # (the scheduler's NetworkPolicy: tests/unit/test_helm_chart.py keeps it equal to the chart's).
    present = {p for p in DEPLOY.rglob("*.yaml")
               if p.name != "kustomization.yaml"
               and not {"examples", "helm", "apiserver", "optional"} & set(p.relative_to(DEPLOY).parts)}
    assert present == listed, f"not in the kustomization: {sorted(map(str, present - listed))}"
    crds = [i for i, entry in enumerate(kustomization["resources"]) if entry.startswith("crds/")]
    assert crds == list(range(len(crds))), "CRDs first: later documents may use them"


# --- what the image installs: the wheel ---------------------------------------------------------------------


HARNESS = "tessera_testing"


def copy_build_context(context: Path) -> Path:
    """The Docker build context (per .dockerignore) copied to `context`."""
    for entry in dockerignore_includes():
        source, target = REPO / entry, context / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target)
    return context


def test_the_wheel_holds_the_product_and_no_test_harness(tmp_path: Path) -> None:
    """The wheel the Dockerfile installs, built the same way from the same context: only the
    `scheduler` package, none of the test harness (the fault proxy and scenario runner, the
    invariant checks, the fake kubelet), and no product module that imports the harness."""
    context = copy_build_context(tmp_path / "context")
    assert not (context / HARNESS).exists()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-cache-dir", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(tmp_path / "wheels"), str(context)],
                   check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheels").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        sources = {name: archive.read(name).decode() for name in names if name.endswith(".py")}
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")} == {"scheduler"}
    assert "scheduler/cli.py" in names and "scheduler/agent/agent.py" in names
    harness = [name for name in names if "testing" in name or ("fake" in name and "fakenodes" not in name)]
    assert harness == [], f"test harness in the wheel: {harness}"
    for name, source in sources.items():
        imported = {alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
        assert not {m for m in imported if m.split(".")[0] in (HARNESS, "tests", "pytest")}, name


def test_the_image_records_the_commit_it_is_built_from(tmp_path: Path) -> None:
    """A day-2 trial: every build of 0.1.0 said `tessera 0.1.0`. The build context has no .git, so
    the build stage writes the GIT_COMMIT build arg into scheduler/data/build-commit before the
    wheel is built; the wheel carries it and the installed package reports it."""
    build = [ins for ins in instructions() if ins.stage == 0]
    args = {ins.args.partition("=")[0]: ins.args.partition("=")[2] for ins in build if ins.keyword == "ARG"}
    assert args == {"GIT_COMMIT": "unknown", "GIT_TREE_STATE": "unknown"}
    keywords = [(ins.keyword, ins.args) for ins in build]
    written = keywords.index(("RUN", """printf '%s\\n%s\\n' "$GIT_COMMIT" "$GIT_TREE_STATE" > scheduler/data/build-commit"""))
    assert written < next(i for i, (k, a) in enumerate(keywords) if k == "RUN" and a.startswith("pip wheel"))

    from scheduler.build_info import BuildInfo, read_build_info

    context = copy_build_context(tmp_path / "context")
    commit = "0123456789abcdef0123456789abcdef01234567"
    (context / "scheduler" / "data" / "build-commit").write_text(f"{commit}\nclean\n")  # what the RUN writes
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-cache-dir", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(tmp_path / "wheels"), str(context)],
                   check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheels").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "site-packages")
    installed = read_build_info(tmp_path / "site-packages" / "scheduler")
    assert (installed.git_commit, installed.git_tree_state) == (commit, "clean")
    assert installed == BuildInfo(pyproject()["project"]["version"], commit, "clean")


# --- rehearsing the build without Docker -----------------------------------------------------------------------


def simulate_build(workdir: Path) -> None:
    """The Dockerfile's build steps on this machine: same context (per .dockerignore), same pins,
    same pip flags; then the installed tree is made read-only and run as uid 65532 (when root)."""

    def sh(*argv: str | Path, env: dict[str, str] | None = None) -> str:
        print("+", " ".join(map(str, argv)), flush=True)
        return subprocess.run([str(a) for a in argv], check=True, text=True, capture_output=True,
                              env=env).stdout

    context = copy_build_context(workdir / "context")
    python = shutil.which("python3.11") or sys.executable
    build = workdir / "build-venv"
    sh(python, "-m", "venv", build)
    pip = build / "bin" / "pip"
    pins = build_tool_pins()
    sh(pip, "install", "--no-cache-dir", *(f"{name}=={version}" for name, version in sorted(pins.items())))
    sh(pip, "wheel", "--no-cache-dir", "--no-deps", "--no-build-isolation", "--wheel-dir", workdir / "wheels", context)
    target = workdir / "opt-tessera"
    sh(python, "-m", "venv", "--without-pip", target)
    target_python = target / "bin" / "python"
    sh(pip, "--python", target_python, "install", "--no-cache-dir", "--no-deps", "--only-binary=:all:",
       "--requirement", context / "deploy" / "requirements.lock")
    sh(pip, "--python", target_python, "install", "--no-cache-dir", "--no-deps", *sorted((workdir / "wheels").glob("*.whl")))
    print(sh(pip, "--python", target_python, "check"), end="")
    sh(target_python, "-m", "compileall", "-q", target / "lib")
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"venv: {size / 2**20:.0f} MiB, {len(list(target.rglob('*')))} files")
    before = sorted(str(p) for p in target.rglob("*"))
    sh("chmod", "-R", "a-w", target)
    env = {"PATH": f"{target / 'bin'}:/usr/bin:/bin", "HOME": "/nonexistent", "PYTHONDONTWRITEBYTECODE": "1"}
    prefix: list[str] = []
    if os.geteuid() == 0 and shutil.which("setpriv"):
        sh("chmod", "a+rx", workdir)
        prefix = ["setpriv", f"--reuid={IMAGE_UID}", f"--regid={IMAGE_UID}", "--clear-groups"]
    print(sh(*prefix, target / "bin" / "tessera", "--version", env=env), end="")
    print(sh(*prefix, target / "bin" / "tessera", "run", "--help", env=env).splitlines()[0])
    agent = subprocess.run([*prefix, str(target / "bin" / "tessera"), "agent", "--help"], env=env, text=True,
                           capture_output=True)
    print(agent.stdout.splitlines()[0] if agent.returncode == 0 else
          f"`tessera agent` is not available yet: {agent.stderr.strip().splitlines()[-1]}")
    sh(*prefix, target / "bin" / "python", "-c",
       "import grpc, pynvml, numpy, google.protobuf; import scheduler.agent.agent, scheduler.kube.run_cli", env=env)
    after = sorted(str(p) for p in target.rglob("*"))
    assert before == after, "running tessera wrote into its installation"
    print(f"OK: built and ran as uid {IMAGE_UID if prefix else os.geteuid()} from a read-only tree")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write-lock", action="store_true", help="regenerate deploy/requirements.lock")
    parser.add_argument("--simulate-build", action="store_true", help="rehearse the image build without Docker")
    parser.add_argument("--keep", action="store_true", help="keep the build directory")
    args = parser.parse_args()
    if args.write_lock:
        write_lock()
    if args.simulate_build:
        workdir = Path(tempfile.mkdtemp(prefix="tessera-image-"))
        try:
            simulate_build(workdir)
        finally:
            if args.keep:
                print(f"kept {workdir}")
            else:
                subprocess.run(["chmod", "-R", "u+w", str(workdir)], check=False)
                shutil.rmtree(workdir, ignore_errors=True)
    if not (args.write_lock or args.simulate_build):
        parser.print_help()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
