"""Prompt-prefix fingerprints and the cache-breaker lint. The prompt's content never leaves the process.

A prompt is cut into blocks in the order providers cache it: tool definitions, system prompt, then each
message. Block ``i`` gets a chain hash over blocks ``0..i`` (so equal hashes mean an equal prefix) and its
size in characters. Comparing a call's chain with the previous call of the same task (same provider and
model) tells how long the stable prefix was and at which block it broke. The lint flags volatile content
(timestamps, dates, UUIDs, random ids) in the system prompt or tool definitions: each one changes the
front of the prompt on every call, so nothing after it can be served from the provider's prompt cache.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.util.types import AttributeValue

from . import names as n

if TYPE_CHECKING:
    from .spans import Task

__all__ = ["Fingerprint", "PromptBlocks", "common_prefix", "prompt_attributes"]


MAX_BLOCKS = 128  # longer prompts fold their tail into the last block
MAX_FINDINGS = 8
HASH_BYTES = 8
LINTED_KINDS = frozenset({"tools", "system", "developer"})

_VOLATILE = re.compile(
    r"(?P<timestamp>\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}\b)"
    r"|(?P<clock>\b\d{1,2}:\d{2}:\d{2}\b)"
    r"|(?P<epoch>\b1[5-9]\d{8}(?:\d{3})?\b)"
    r"|(?P<random_id>\b[0-9a-f]{32}\b|\b[A-Za-z]{2,12}[_-](?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{16,}\b)"
)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    hashes: tuple[str, ...]
    chars: tuple[int, ...]
    kinds: tuple[str, ...]


class PromptBlocks:
    """A prompt as ordered ``(kind, content)`` blocks: tools, system, then one block per message."""

    __slots__ = ("blocks",)

    def __init__(self, blocks: list[tuple[str, object]]) -> None:
        self.blocks = blocks

    @classmethod
    def from_parts(cls, *, system: object = None, tools: object = None, messages: object = None) -> PromptBlocks:
        blocks: list[tuple[str, object]] = []
        if tools:
            blocks.append(("tools", tools))
        if system:
            blocks.append(("system", system))
        if isinstance(messages, str):
            blocks.append(("user", messages))
        elif isinstance(messages, Sequence):
            blocks.extend((_role(m), m) for m in messages)
        return cls(blocks)

    @classmethod
    def from_openai_chat(cls, body: Mapping[str, Any]) -> PromptBlocks:
        return cls.from_parts(tools=body.get("tools"), messages=body.get("messages"))

    @classmethod
    def from_openai_responses(cls, body: Mapping[str, Any]) -> PromptBlocks:
        return cls.from_parts(tools=body.get("tools"), system=body.get("instructions"), messages=body.get("input"))

    @classmethod
    def from_anthropic(cls, body: Mapping[str, Any]) -> PromptBlocks:
        return cls.from_parts(tools=body.get("tools"), system=body.get("system"), messages=body.get("messages"))

    def fingerprint(self) -> tuple[Fingerprint, list[str]]:
        """The chain of block hashes, their sizes and kinds, and the lint findings (``kind@block:offset``)."""
        hashes: list[str] = []
        chars: list[int] = []
        kinds: list[str] = []
        findings: list[str] = []
        previous = b""
        blocks = self.blocks
        if len(blocks) > MAX_BLOCKS:
            tail = [content for _, content in blocks[MAX_BLOCKS - 1 :]]
            blocks = [*blocks[: MAX_BLOCKS - 1], ("rest", tail)]
        for index, (kind, content) in enumerate(blocks):
            text = _canonical(content)
            digest = hashlib.blake2b(previous + text.encode("utf-8", "surrogatepass"), digest_size=HASH_BYTES)
            previous = digest.digest()
            hashes.append(digest.hexdigest())
            chars.append(len(text))
            kinds.append(kind)
            if kind in LINTED_KINDS and len(findings) < MAX_FINDINGS:
                for match in _VOLATILE.finditer(text):
                    findings.append(f"{match.lastgroup}@{index}:{match.start()}")
                    if len(findings) >= MAX_FINDINGS:
                        break
        return Fingerprint(tuple(hashes), tuple(chars), tuple(kinds)), findings


def prompt_attributes(blocks: PromptBlocks, task: Task | None, key: tuple[str, ...]) -> dict[str, AttributeValue]:
    """Span attributes for a prompt; with a task, also compared with its previous call with the same ``key``
    (provider, model and API)."""
    if not blocks.blocks:
        return {}
    fingerprint, findings = blocks.fingerprint()
    attributes: dict[str, AttributeValue] = {
        n.PROMPT_BLOCK_HASHES: fingerprint.hashes,
        n.PROMPT_BLOCK_CHARS: fingerprint.chars,
        n.PROMPT_BLOCK_KINDS: fingerprint.kinds,
    }
    if findings:
        attributes[n.PROMPT_CACHE_BREAKERS] = findings
    previous = task._swap_prompt(key, fingerprint) if task is not None else None
    if previous is not None:
        stable = common_prefix(previous.hashes, fingerprint.hashes)
        attributes[n.PROMPT_STABLE_PREFIX_BLOCKS] = stable
        attributes[n.PROMPT_STABLE_PREFIX_CHARS] = sum(fingerprint.chars[:stable])
        if stable < min(len(previous.hashes), len(fingerprint.hashes)):
            attributes[n.PROMPT_PREFIX_BREAK_BLOCK] = stable
    return attributes


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading chain hashes are equal (a chain hash covers its whole prefix)."""
    stable = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        stable += 1
    return stable


def _role(message: object) -> str:
    role = message.get("role") if isinstance(message, Mapping) else getattr(message, "role", None)
    if isinstance(role, str) and role:
        return role
    kind = message.get("type") if isinstance(message, Mapping) else getattr(message, "type", None)
    return kind if isinstance(kind, str) and kind else "message"


def _without_cache_control(value: object) -> object:
    """Drop Anthropic's ``cache_control`` markers (two levels deep): moving a marker is not a content change."""
    if isinstance(value, Mapping):
        return {
            k: [_drop_marker(item) for item in v] if isinstance(v, list) else v
            for k, v in value.items()
            if k != "cache_control"
        }
    if isinstance(value, list):
        return [_drop_marker(item) for item in value]
    return value


def _drop_marker(item: object) -> object:
    if isinstance(item, Mapping) and "cache_control" in item:
        return {k: v for k, v in item.items() if k != "cache_control"}
    return item


def _canonical(content: object) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(
        _without_cache_control(content), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain
    )


def _plain(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(exclude_none=True)
        except Exception:
            return str(value)
    return str(value)
