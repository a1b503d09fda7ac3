"""`kubectl tessera` takes kubectl's impersonation flags (a multi-team admin's trial: `--as` was
refused, so an admin could not see what a team's identity is shown): `--as`, `--as-group`
(repeated) and `--as-uid`, before or after the subcommand, sent as kubectl sends them —
Impersonate-User, one Impersonate-Group header per group, Impersonate-Uid
(tests/e2e/test_kubectl_namespace_user.py checks the apiserver's answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.kube.http import Impersonation
from scheduler.kubectl import cli


def test_the_impersonation_flags_are_taken_before_or_after_the_command() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["--as", "system:serviceaccount:team:default", "what-if", "--as-group", "team-a",
                              "--as-group", "team-b", "--as-uid", "1234"])
    assert cli.impersonation(args) == Impersonation("system:serviceaccount:team:default", ("team-a", "team-b"), "1234")
    args = parser.parse_args(["nodes", "--as", "alice"])
    assert cli.impersonation(args) == Impersonation("alice")
    assert cli.impersonation(parser.parse_args(["nodes"])) is None
    assert cli.impersonation(parser.parse_args(["nodes", "--as", ""])) is None  # kubectl: empty is none


def test_the_headers_are_kubectls() -> None:
    assert Impersonation("alice", ("a", "b"), "u1").headers() == [
        ("Impersonate-User", "alice"), ("Impersonate-Group", "a"), ("Impersonate-Group", "b"),
        ("Impersonate-Uid", "u1")]
    assert Impersonation("alice").headers() == [("Impersonate-User", "alice")]


def test_groups_or_a_uid_without_a_user_is_refused_as_kubectl_refuses_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster: "
                          "{server: 'https://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: k, user: admin}\n"
                          "users:\n- name: admin\n  user: {token: t}\n")
    for flags in (["--as-group", "team-a"], ["--as-uid", "1234"]):
        status = cli.main(["nodes", "--kubeconfig", str(kubeconfig), *flags])
        assert status == 2
        assert capsys.readouterr().err == ("Error in configuration: requesting uid, groups or user-extra for admin "
                                           "without impersonating a user\n")


def test_groups_before_and_after_the_command_all_count_as_kubectl_counts_them() -> None:
    """Review: `--as-group` before the subcommand was dropped when more followed it (the
    subcommand's list replaced the one before); kubectl's repeated flag keeps every value in order."""
    parser = cli.build_parser()
    args = parser.parse_args(["--as", "u", "--as-group", "a", "explain", "x", "--as-group", "b"])
    assert cli.impersonation(args) == Impersonation("u", ("a", "b"))
    args = parser.parse_args(["--as-group", "a", "--as-group", "b", "--as", "u", "nodes", "--as-group", "c"])
    assert cli.impersonation(args) == Impersonation("u", ("a", "b", "c"))
    args = parser.parse_args(["--as", "u", "--as-group", "a", "nodes"])
    assert cli.impersonation(args) == Impersonation("u", ("a",))
