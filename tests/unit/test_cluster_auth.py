"""Issue 44, item 8: a driver sends Ray's token where one is at hand, as Ray itself does for
``ray start`` and ``ray.init()`` without an address (the end-to-end recipe is in
tests/integration/test_cluster_recipe.py)."""

import sys

from gorila.runtime.cluster_auth import prefer_token_auth, refusal, token_source


def test_a_token_at_hand_turns_token_auth_on_unless_the_mode_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delitem(sys.modules, "ray", raising=False)  # as before gorila's Ray runtime is first imported
    environ: dict[str, str] = {}
    assert token_source({}) is None and not prefer_token_auth(environ)
    assert "RAY_AUTH_MODE" not in environ
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("abc\n")
    assert token_source({}) == ("abc", str(tmp_path / ".ray" / "auth_token"))
    assert prefer_token_auth(environ := {}) and environ["RAY_AUTH_MODE"] == "token"
    assert not prefer_token_auth(environ := {"RAY_AUTH_MODE": "disabled"}) and environ["RAY_AUTH_MODE"] == "disabled"
    assert token_source({"RAY_AUTH_TOKEN": " xyz "}) == ("xyz", "RAY_AUTH_TOKEN")


def test_the_refusal_says_which_variable_to_set():
    assert "RAY_AUTH_TOKEN" in refusal("10.0.0.5:6379", "--address", True, ("x", "/home/u/.ray/auth_token"))
    assert "/home/u/.ray/auth_token" in refusal("10.0.0.5:6379", "--address", True, ("x", "/home/u/.ray/auth_token"))


def test_once_ray_is_imported_the_mode_is_left_as_ray_read_it(tmp_path, monkeypatch):
    """Ray reads the mode as it is imported: set later, it would reach only the processes this one
    starts, and an embedded Ray's GCS would ask for a token the driver never sends."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("abc\n")
    monkeypatch.setitem(sys.modules, "ray", sys.modules.get("ray", object()))
    assert not prefer_token_auth(environ := {}) and "RAY_AUTH_MODE" not in environ
