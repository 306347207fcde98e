"""Issue 44, item 8: a driver sends Ray's token where one is at hand, as Ray itself does for
``ray start`` and ``ray.init()`` without an address (the end-to-end recipe is in
tests/integration/test_cluster_recipe.py)."""

from gorila.runtime.cluster_auth import prefer_token_auth, refusal, token_source


def test_a_token_at_hand_turns_token_auth_on_unless_the_mode_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert token_source({}) is None and not prefer_token_auth(environ := {})
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
