"""A user's configs beside the shipped ones, and where a config's relative paths point."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence_bench._resources import packaged
from evidence_bench.collections.queryset import load_query_set, resolve_path
from evidence_bench.errors import ConfigurationError
from evidence_bench.experiment.config import CONF_DIR, compose, config_dirs
from tests.conftest import write_tiny_collection

MINE = """\
# @package _global_
defaults:
  - /policy@policies.oracle: oracle
experiment:
  name: mine
  queries: 3
"""


def _user_conf(root: Path) -> Path:
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "experiment" / "mine.yaml").write_text(MINE)
    return root / "conf"


def test_the_shipped_configs_are_the_checkouts_conf() -> None:
    assert (CONF_DIR / "config.yaml").is_file()
    assert (Path(__file__).parents[1] / "conf").resolve() == CONF_DIR


def test_without_a_conf_directory_only_the_shipped_configs_are_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert config_dirs() == (CONF_DIR,)
    cfg, _ = compose(["+experiment=smoke"])
    assert cfg["experiment"]["name"] == "smoke"


def test_a_users_experiment_reuses_the_shipped_policies_and_query_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = _user_conf(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert config_dirs() == (user.resolve(), CONF_DIR)
    cfg, _ = compose(["+experiment=mine"])
    assert cfg["experiment"] == {**cfg["experiment"], "name": "mine", "queries": 3}
    assert cfg["policies"]["oracle"]["kind"] == "oracle"
    assert cfg["query_set"]["path"] == "pkg://collections/cranfield"
    # the shipped query set's data resolves into the package, from any directory
    query_set = load_query_set(cfg["query_set"], limit=3)
    assert list(query_set.queries) == ["1", "2", "3"]  # queries.jsonl's first ids


def test_a_users_config_is_searched_first_and_shadows_a_shipped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = _user_conf(tmp_path)
    (user / "policy").mkdir()
    (user / "policy" / "oracle.yaml").write_text("kind: oracle\ndepth: 3\n")
    monkeypatch.chdir(tmp_path)
    cfg, _ = compose(["+experiment=mine"])
    assert cfg["policies"]["oracle"]["depth"] == 3


def test_config_dir_names_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = _user_conf(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path)
    assert config_dirs(user) == (user.resolve(), CONF_DIR)
    assert compose(["+experiment=mine"], user)[0]["experiment"]["name"] == "mine"
    with pytest.raises(ConfigurationError, match=r"^--config-dir nope: no such directory$"):
        config_dirs("nope")


def test_a_relative_path_is_against_the_working_directory_never_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # the package ships collections/cranfield, but a user's relative path is theirs
    with pytest.raises(ConfigurationError) as caught:
        resolve_path("collections/cranfield", "query_set.path")
    assert str(caught.value) == (
        f"query_set.path='collections/cranfield': no such file or directory (in {tmp_path})"
    )
    write_tiny_collection(tmp_path / "collections" / "cranfield")
    assert resolve_path("collections/cranfield", "query_set.path") == Path("collections/cranfield")
    assert resolve_path("pkg://collections/cranfield", "query_set.path") == packaged(
        "collections/cranfield"
    )
    # directories a run or record creates may be missing
    assert resolve_path("runs", "runs_dir") == Path("runs")
    assert resolve_path("mine", "query_set.cassettes") == Path("mine")


def test_a_packaged_path_in_the_checkout_reads_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parents[1])
    assert resolve_path("pkg://cassettes/cranfield", "query_set.cassettes") == Path(
        "cassettes/cranfield"
    )
