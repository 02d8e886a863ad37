"""Redaction of secrets in everything an evidence bundle holds.

An evidence bundle leaves the host: it is attached to an issue, sent to another team.
:class:`Redactor` hides what looks like a secret before any byte is written:

- the value of every environment variable whose *name* says it is a secret (``TOKEN``,
  ``SECRET``, ``PASSWORD``, ``KEY``, ``CREDENTIAL``, ``AUTH``, ``COOKIE``, ``SESSION``...),
  in env dumps and wherever that value appears verbatim in any text (a test that printed
  its token, a command line that carries it);
- ``NAME=value`` / ``NAME: value`` assignments of such names inside free text;
- passwords in URLs (``scheme://user:password@host``), ``Bearer``/``Basic`` credentials
  and ``Authorization:`` headers, and well-known token shapes (GitHub, Slack, AWS keys,
  ``sk-`` API keys, JWTs).

It only rewrites text; deciding which files go into a bundle is ``writer.py``'s job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "<redacted>"

#: Words of a variable name (split at ``_``, ``-``, ``.``) that make it a secret, so
#: ``API_KEY`` is one and ``MONKEY`` or ``KEYBOARD`` are not.
SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASSPHRASE",
        "PWD",
        "KEY",
        "KEYS",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "COOKIE",
        "COOKIES",
        "SESSION",
        "PRIVATE",
    }
)
#: In free text and data (``name = value`` in logs, code, JSON) a name is a secret only
#: with one of these words, or ``KEY`` next to a qualifier: ``cache_key = ...`` or
#: ``unlift_effect_tokens = True`` in generated code are no secrets.
STRONG_WORDS = SECRET_WORDS - {"TOKENS", "PWD", "KEY", "KEYS", "COOKIES", "SESSION", "PRIVATE"}
KEY_QUALIFIERS = frozenset({"API", "ACCESS", "PRIVATE", "SECRET", "SIGNING", "CLIENT"})
#: Values that are never secrets (switches, empties, numbers).
_PLAIN_VALUE = re.compile(
    r"(?i)^(?:true|false|none|null|nil|yes|no|on|off|[-+]?[\d.]+(?:e[-+]?\d+)?)$"
)
#: A name word ending in one of these is a secret too (``GITHUBTOKEN``, ``DBPASSWORD``).
SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")
#: Names that contain a secret word but hold no secret (paths, switches, public ids).
NOT_SECRET = frozenset(
    {
        "PWD",
        "OLDPWD",
        "KEYMAP",
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "GPG_AGENT_INFO",
        "PYTHONHASHSEED",
        "TORCH_COMPILE_DEBUG",
        # desktop session plumbing: public values ("wayland", "ubuntu") that would be
        # masked all over the bundle
        "XDG_SESSION_ID",
        "XDG_SESSION_TYPE",
        "XDG_SESSION_CLASS",
        "XDG_SESSION_DESKTOP",
        "DESKTOP_SESSION",
        "DBUS_SESSION_BUS_ADDRESS",
        "SESSION_MANAGER",
    }
)
#: A verbatim secret value shorter than this is not replaced everywhere (it would
#: shred ordinary text); its ``NAME=value`` occurrences still are.
MIN_LITERAL = 4

_NAME_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@'\"]*:)[^\s@/'\"]+@")
_AUTH_SCHEME = re.compile(r"(?i)\b(?P<head>(?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=\-]{8,}")
_AUTH_HEADER = re.compile(
    r"(?i)(?P<head>\b(?:authorization|proxy-authorization|cookie|set-cookie|x-api-key)"
    r"\s*[:=]\s*)[^\r\n]+"
)
_TOKEN_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
# NAME=value, NAME: value, "NAME": "value", export NAME=value (value up to a blank/quote)
_ASSIGNMENT = re.compile(
    r"(?P<head>(?P<q>['\"]?)(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?P=q)\s*(?:=|:)\s*(?P<vq>['\"]?))"
    r"(?P<value>[^\s'\",;}]+)"
)


def is_secret_name(name: str, strict: bool = False) -> bool:
    """Whether an environment variable named ``name`` holds a secret; ``strict`` for names
    met in free text and data, where only unmistakable names count (see STRONG_WORDS)."""
    upper = name.upper()
    if upper in NOT_SECRET:
        return False
    words = [w for w in _NAME_SPLIT.split(upper) if w]
    if any(w.endswith(SECRET_SUFFIXES) for w in words):
        return True
    if not strict:
        return any(w in SECRET_WORDS for w in words)
    if any(w in STRONG_WORDS for w in words):
        return True
    return any(
        w in ("KEY", "KEYS") and i > 0 and words[i - 1] in KEY_QUALIFIERS
        for i, w in enumerate(words)
    )


class Redactor:
    """Hides secrets in text; knows the literal secret values it was given."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        for value in secrets:
            value = str(value)
            if len(value) >= MIN_LITERAL:
                self.secrets.add(value)
        # longest first: a secret that contains another is replaced whole
        # not inside a longer word: a password "secret" leaves "test_secrets" alone
        alternatives = "|".join(re.escape(s) for s in sorted(self.secrets, key=len, reverse=True))
        self._literal = (
            re.compile(rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])")
            if self.secrets
            else None
        )

    def learn_env(self, *envs: Mapping[str, str]) -> Redactor:
        """Remember the values of the secret-named variables of ``envs`` (and URL passwords)."""
        found: list[str] = []
        for env in envs:
            for name, value in env.items():
                if not value:
                    continue
                if is_secret_name(name):
                    found.append(value)
                for match in _URL_PASSWORD.finditer(value):
                    password = match.group(0)[len(match.group("head")) : -1]
                    found.append(password)
        self.add(found)
        return self

    def text(self, text: str) -> str:
        """``text`` with every recognised secret replaced by :data:`MASK`."""
        if not text:
            return text
        if self._literal is not None:
            text = self._literal.sub(MASK, text)
        text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{MASK}@", text)
        text = _AUTH_HEADER.sub(lambda m: f"{m.group('head')}{MASK}", text)
        text = _AUTH_SCHEME.sub(lambda m: f"{m.group('head')}{MASK}", text)
        text = _TOKEN_SHAPES.sub(MASK, text)
        return _ASSIGNMENT.sub(self._assignment, text)

    @staticmethod
    def _assignment(match: re.Match[str]) -> str:
        value = match.group("value")
        if value == MASK or _PLAIN_VALUE.match(value):
            return match.group(0)
        if not is_secret_name(match.group("name"), strict=True):
            return match.group(0)
        return match.group("head") + MASK

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """An environment with secret-named values masked and the others' text redacted."""
        return {
            name: (MASK if is_secret_name(name) and value else self.text(value))
            for name, value in sorted(env.items())
        }

    def data(self, value: Any) -> Any:
        """JSON-like data with every string redacted and the string values of secret-named
        keys masked (numbers and switches are no secrets)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                k: (
                    MASK
                    if isinstance(k, str)
                    and isinstance(v, str)
                    and v
                    and not _PLAIN_VALUE.match(v)
                    and is_secret_name(k, strict=True)
                    else self.data(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    def argv(self, argv: Iterable[str]) -> list[str]:
        """A command line with ``--token=x`` style values and known secrets masked."""
        out: list[str] = []
        mask_next = False
        for arg in argv:
            if mask_next:
                out.append(MASK)
                mask_next = False
                continue
            flag = arg.lstrip("-")
            if arg.startswith("-") and "=" not in arg and is_secret_name(flag):
                mask_next = True
                out.append(arg)
                continue
            out.append(self.text(arg))
        return out
