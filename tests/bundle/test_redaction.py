"""Redaction of secrets in text, environments, data and command lines."""

from __future__ import annotations

import pytest

from instep.bundle.redaction import MASK, Redactor, is_secret_name


@pytest.mark.parametrize(
    "name",
    ["API_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "MY_API_KEY",
     "PRIVATE_KEY", "SESSION_ID", "npm_config_authtoken", "HTTP_COOKIE", "DBPASSWORD",
     "GOOGLE_APPLICATION_CREDENTIALS", "DB_PASSWD", "AUTH"],
)  # fmt: skip
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["PATH", "HOME", "PWD", "MONKEY", "KEYBOARD", "AUTHOR", "TOKENIZERS_PARALLELISM",
     "SSH_AUTH_SOCK", "TORCH_COMPILE_DEBUG", "TORCHINDUCTOR_CACHE_DIR", "PYTHONHASHSEED"],
)  # fmt: skip
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_text_redaction_of_known_values_and_shapes():
    r = Redactor().learn_env({"API_TOKEN": "abc123", "DATABASE_URL": "postgresql://u:pw9x@h/db"})
    text = (
        "API_TOKEN=abc123 then abc123 alone; url postgresql://u:pw9x@h/db\n"
        "Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.SflKxwRJSMeKK\n"
        "curl -H 'x' https://bob:open-sesame@example.com/x token ghp_" + "a" * 36 + "\n"
        'export MY_SECRET="s3cr3t-value"\n{"password": "pw-in-json"}\n'
    )
    out = r.text(text)
    for secret in ("abc123", "pw9x", "eyJhbGciOi", "open-sesame", "ghp_", "s3cr3t", "pw-in-json"):
        assert secret not in out, secret
    assert "https://bob:<redacted>@example.com/x" in out
    assert out.count(MASK) >= 7


def test_a_short_or_embedded_value_does_not_shred_ordinary_text():
    r = Redactor().learn_env({"DB_PASSWORD": "secret", "TOKEN": "ab"})
    assert r.text("test_leaks_secrets failed; the secret is here") == (
        "test_leaks_secrets failed; the <redacted> is here"
    )
    assert r.text("ab cd") == "ab cd"  # under MIN_LITERAL: only NAME=value forms go
    assert r.text("TOKEN=ab") == "TOKEN=<redacted>"


def test_env_data_and_argv():
    r = Redactor().learn_env({"HF_TOKEN": "hf_" + "x" * 30})
    env = r.env({"HF_TOKEN": "hf_" + "x" * 30, "PATH": "/usr/bin", "URL": "http://a:b1b2@h"})
    assert env == {"HF_TOKEN": MASK, "PATH": "/usr/bin", "URL": "http://a:<redacted>@h"}
    data = r.data({"argv": ["--api-key", "k"], "nested": {"client_secret": "zz", "n": 3}})
    assert data == {"argv": ["--api-key", "k"], "nested": {"client_secret": MASK, "n": 3}}
    assert r.argv(["run", "--token", "t0ken", "--password=pw", "--db", "pg://u:p4ss@h"]) == [
        "run",
        "--token",
        MASK,
        "--password=<redacted>",
        "--db",
        "pg://u:<redacted>@h",
    ]


def test_code_and_compiler_data_are_left_intact():
    """Generated code and torch's JSON name keys and tokens that are no secrets."""
    r = Redactor().learn_env({"PATH": "/usr/bin"})
    code = (
        "torch._functorch.config.unlift_effect_tokens = True\n"
        "cache_key = get_hash(source_code)\n"
        '{"frame_key": "1a2b3c", "bypass_autograd_cache_key": null, "key": "fx-abc"}\n'
    )
    assert r.text(code) == code
    timings = {"PyCodeCache.load_by_key_path": 0.25, "CacheBase.get_system.triton_key": 1.5}
    assert r.data(timings) == timings
