"""What each coding agent needs to run through the gateway: its settings, written in a profile
of its own, its environment, and its arguments (``toolwire launch``, :mod:`.launch`).

Pure: from where the gateway is (:class:`Target`) and the profile's directory, each agent's
:class:`Setup`; nothing is written or run here. Every agent is pointed at a profile directory
of toolwire's (a variable each one reads: ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``,
``OPENCODE_CONFIG``, ``QWEN_HOME``, ``GEMINI_CLI_HOME``), never at the
user's own settings, which stay as they are.

What each is given, and why:

* **Claude Code** (Messages): ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` (approved in
  its profile, so it does not ask); ``ENABLE_TOOL_SEARCH=true`` (its MCP tools deferred until
  the model searches: hundreds of schemas do not fill a small model's context);
  ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` a quarter of the context (it asks 32,000 or more, and its
  prompt is some 12,000 tokens); ``CLAUDE_CODE_ATTRIBUTION_HEADER=0`` (the header it writes at
  the head of its system prompt changes with every request, so a local engine's kept prefix
  would never match); ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``; on a gateway of
  several models, the model's name for every part it plays; and nothing of the user's that
  sends it to another provider (``CLAUDE_CODE_USE_BEDROCK`` …).
* **Codex** (Responses): a provider block naming the gateway, a model name from its own
  catalogue (``gpt-5.5``: with it Codex offers its shell and ``apply_patch``; an unknown name
  gets no ``apply_patch``), and the model's context window, as ``-c`` overrides.
* **opencode** (Chat Completions): an OpenAI-compatible provider with the model's context and
  output limits, used for its small tasks (titles) too.
* **Qwen Code** (Chat Completions): its OpenAI auth, base URL, key and model.
* **Gemini CLI** (the Gemini API): ``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_API_KEY`` and a
  model named with ``-m`` (its default, ``auto``, first asks a classifier model to route each
  turn: a second request a local model would spend minutes on).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AGENTS", "CODEX_MODEL", "Setup", "Target", "output_tokens"]

#: A model name Codex has in its catalogue (``codex debug models``): see the module.
CODEX_MODEL = "gpt-5.5"


@dataclass(frozen=True)
class Target:
    """Where an agent is sent: the gateway's root URL (no ``/v1``), the key it takes
    (any text when it takes none), the name of the model it serves, and that model's context
    in tokens."""

    root: str
    key: str
    model: str
    context: int
    #: The gateway serves several models: the agent must name this one.
    many: bool = False


@dataclass(frozen=True)
class Setup:
    """How to run one agent: its program, the arguments before the user's, the environment
    it adds, and the files of its profile (a path under the profile's directory → text)."""

    program: str
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    #: Variables taken out of the agent's environment: each would send it elsewhere
    #: (Claude Code's ``CLAUDE_CODE_USE_BEDROCK``, …).
    drop: tuple[str, ...] = ()


def output_tokens(context: int) -> int:
    """The reply length an agent is told to ask for: a quarter of the context (the rest
    holds its prompt and the conversation), between 1,024 and 32,000 tokens."""
    return max(1024, min(32_000, context // 4))


def _json(value: object) -> str:
    return json.dumps(value, indent=2) + "\n"


#: What would send Claude Code to another provider than the gateway, or with another key.
_CLAUDE_ELSEWHERE = (
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "ANTHROPIC_VERTEX_BASE_URL",
    "ANTHROPIC_FOUNDRY_BASE_URL",
)
#: Claude Code's names of the models it asks for, by the part each plays.
_CLAUDE_MODELS = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
)


def claude(target: Target, profile: Path) -> Setup:
    env = {
        "ANTHROPIC_BASE_URL": target.root,
        "ANTHROPIC_API_KEY": target.key,
        "ENABLE_TOOL_SEARCH": "true",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(output_tokens(target.context)),
        "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if target.many:  # (one model answers to any name: Claude Code's own then)
        env.update(dict.fromkeys(_CLAUDE_MODELS, target.model))
    state = {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [target.key[-20:]], "rejected": []},
    }
    files = {"settings.json": _json({"env": env}), ".claude.json": _json(state)}
    env["CLAUDE_CONFIG_DIR"] = str(profile)
    return Setup("claude", (), env, files, _CLAUDE_ELSEWHERE)


def codex(target: Target, profile: Path) -> Setup:
    """Codex's settings as ``-c`` overrides (its ``config.toml`` in the profile stays its
    own, for the user's MCP servers and the like)."""
    provider = (
        f'{{name="toolwire", base_url="{target.root}/v1", wire_api="responses", '
        'env_key="TOOLWIRE_TOKEN"}'
    )
    overrides = {
        "model": f'"{CODEX_MODEL}"',
        "model_provider": '"toolwire"',
        "model_context_window": str(target.context),
        "model_providers.toolwire": provider,
    }
    argv = tuple(a for key, value in overrides.items() for a in ("-c", f"{key}={value}"))
    env = {"CODEX_HOME": str(profile), "TOOLWIRE_TOKEN": target.key}
    return Setup("codex", argv, env)


def opencode(target: Target, profile: Path) -> Setup:
    limit = {"context": target.context, "output": output_tokens(target.context)}
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "toolwire": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "toolwire",
                "options": {"baseURL": f"{target.root}/v1", "apiKey": target.key},
                "models": {target.model: {"name": target.model, "limit": limit, "tool_call": True}},
            }
        },
        "model": f"toolwire/{target.model}",
        "small_model": f"toolwire/{target.model}",
        "autoupdate": False,
        "share": "disabled",
    }
    env = {
        "OPENCODE_CONFIG": str(profile / "opencode.json"),
        "OPENCODE_CONFIG_DIR": str(profile),
        "OPENCODE_DB": str(profile / "opencode.db"),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
    }
    return Setup("opencode", (), env, {"opencode.json": _json(config)})


def qwen(target: Target, profile: Path) -> Setup:
    settings = {"security": {"auth": {"selectedType": "openai"}}, "model": {"name": target.model}}
    env = {
        "QWEN_HOME": str(profile),
        "OPENAI_BASE_URL": f"{target.root}/v1",
        "OPENAI_API_KEY": target.key,
        "OPENAI_MODEL": target.model,
    }
    return Setup("qwen", (), env, {"settings.json": _json(settings)})


GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True},
}


def gemini(target: Target, profile: Path) -> Setup:
    env = {
        "GEMINI_CLI_HOME": str(profile),
        "GEMINI_DEFAULT_AUTH_TYPE": "gemini-api-key",
        "GOOGLE_GEMINI_BASE_URL": target.root,
        "GEMINI_API_KEY": target.key,
    }
    files = {".gemini/settings.json": _json(GEMINI_SETTINGS)}
    elsewhere = ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA")
    return Setup("gemini", ("-m", target.model), env, files, elsewhere)


#: Each agent ``toolwire launch`` starts, by the name it is given on the command line.
AGENTS: dict[str, Callable[[Target, Path], Setup]] = {
    "claude": claude,
    "codex": codex,
    "opencode": opencode,
    "qwen": qwen,
    "gemini": gemini,
}
