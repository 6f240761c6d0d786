"""The prompt-injection scanner: pattern families, a severity threshold, block vs sanitize.

Entries are memory that other agents will later read as context, so an entry that tries to steer
its reader ("ignore all previous instructions", "reveal your system prompt") is flagged. The scan
never blocks a write (DECISIONS "Memory"): it sets ``injection_risk`` and stores the threats; the
public feed hides flagged entries and pack creation asks for ``force``.

Five families, each a list of our own patterns with a severity in 0..1:

- *block* families (instructionOverride, roleManipulation, systemPromptLeak) are what an attack
  says. One threat at or above the threshold makes the text risky.
- *sanitize* families (delimiterInjection, encoding) are how an attack hides or frames itself:
  fake ``<system>`` tags, zero-width characters, homoglyphs, base64 or escape runs. On their own
  they are common in honest technical notes, so they never flag a text. Instead their matches are
  removed or decoded and the result is scanned again for the block families: ``ig\\u200bnore
  previous instructions`` and a base64-encoded order are caught that way.

Every pattern is linear-time on Python's backtracking engine: no nested or adjacent unbounded
quantifiers over overlapping classes, gaps between words are bounded, and patterns that may
start at many positions consume only within one line or one short token. ``match`` strings are
cut to ``INJECTION_MATCH_MAX_CHARS`` with invisible characters spelled as code points (``U+200B``).
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from schemas.limits import (
    INJECTION_MATCH_MAX_CHARS,
    INJECTION_MAX_THREATS,
    INJECTION_SCAN_MAX_CHARS,
    INJECTION_THRESHOLD,
)

ThreatType = Literal[
    "instructionOverride",
    "roleManipulation",
    "systemPromptLeak",
    "delimiterInjection",
    "encoding",
]

BLOCK_TYPES: Final[frozenset[ThreatType]] = frozenset(
    {"instructionOverride", "roleManipulation", "systemPromptLeak"}
)
SANITIZE_TYPES: Final[frozenset[ThreatType]] = frozenset({"delimiterInjection", "encoding"})


class Threat(BaseModel):
    """One suspicious span: its family, how sure the pattern is, and the (bounded) text."""

    model_config = ConfigDict(frozen=True)

    type: ThreatType
    severity: float
    match: str


class InjectionScan(BaseModel):
    """The verdict stored on an entry: ``risk`` and, only when risky, the threats behind it."""

    model_config = ConfigDict(frozen=True)

    risk: bool
    threats: list[Threat]


# --- pattern machinery -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pattern:
    type: ThreatType
    severity: float
    regex: re.Pattern[str]
    # What a sanitize-type match becomes in the text that is re-checked ("" removes it).
    replace: Callable[[str], str] | None = None
    # A second look at a match the regex alone cannot judge cheaply (e.g. base64 vs a hex hash).
    accept: Callable[[str], bool] | None = None
    # Case-folded substrings of which every match contains at least one. A text without any of
    # them skips the regex: a substring search is far cheaper than a regex pass. Empty = always run.
    needles: tuple[str, ...] = ()
    # A cheap regex that must find something before the pattern runs (for character classes,
    # which have no substring to look for).
    gate: re.Pattern[str] | None = None
    # Runs on the lower-cased text (compiled without IGNORECASE: several times faster).
    lowered: bool = False
    # The pattern began with ``\b``, checked in Python instead so ``re`` can jump straight to
    # candidates through its literal-prefix scan (a leading assertion disables that scan).
    word_start: bool = False
    # Matches only at the start of a sentence or line (after an optional "please"): keeps an
    # order ("Print the system prompt.") apart from a note ("we print the system prompt in logs").
    sentence_start: bool = False


@dataclass(frozen=True, slots=True)
class _Hit:
    pattern: _Pattern
    start: int
    end: int
    text: str


_FLAGS: Final = re.IGNORECASE | re.MULTILINE

# Reusable fragments. A "gap" is a bounded run of filler words, so no pattern can wander.
_GAP = r"(?:(?:all|any|every|of|the|your|my|these|those|such|prior|earlier)\s+){0,3}"
_PRIOR = r"(?:previous|prior|above|earlier|preceding|former|original|initial|system|existing)"
_ORDERS = (
    r"(?:instructions?|rules|prompts?|directives?|guidelines|guidance|context|commands?"
    r"|messages?|programming|constraints)"
)
# What may come right before an imperative that starts a sentence or a line.
_SENTENCE_ENDS: Final = frozenset("\n.!?:;,\"'>)]")


def _p(
    type_: ThreatType,
    severity: float,
    pattern: str,
    *,
    flags: int = _FLAGS,
    replace: Callable[[str], str] | None = None,
    accept: Callable[[str], bool] | None = None,
    needles: Iterable[str] = (),
    gate: str | None = None,
    sentence_start: bool = False,
) -> _Pattern:
    gate_re = re.compile(gate) if gate is not None else None
    # Case-insensitive patterns run on a lower-cased copy of the text; the few that care about
    # case ("DAN", "SYSTEM:") are compiled without IGNORECASE and see the original.
    lowered = bool(flags & re.IGNORECASE)
    if lowered:
        pattern, flags = _lower_literals(pattern), flags & ~re.IGNORECASE
    word_start = pattern.startswith(r"\b") and not _has_top_level_branch(pattern)
    if word_start:
        pattern = pattern[2:]
    compiled = re.compile(pattern, flags)
    return _Pattern(
        type_,
        severity,
        compiled,
        replace,
        accept,
        tuple(needles),
        gate_re,
        lowered,
        word_start,
        sentence_start,
    )


def _lower_literals(pattern: str) -> str:
    """Lower-case a pattern's literals, leaving escapes (``\\S`` is not ``\\s``) alone."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        else:
            out.append(pattern[i].lower())
            i += 1
    return "".join(out)


def _has_top_level_branch(pattern: str) -> bool:
    """Whether ``|`` splits the whole pattern (then a leading ``\\b`` binds only to branch one)."""
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
        i += 1
    return False


def _spaced(word: str) -> str:
    """``i g n o r e`` / ``i.g.n.o.r.e``: the letters of ``word`` with 1-3 separators between."""
    return r"\b" + r"[\s.\-_*]{1,3}".join(re.escape(c) for c in word) + r"\b"


# Not "skip" or "drop": "drop the previous messages from the queue" is ordinary ops talk.
_OVERRIDE_VERBS: Final = (
    "ignore",
    "disregard",
    "forget",
    "bypass",
    "override",
    "overrule",
    "discard",
)


def _blank(_: str) -> str:
    """A framing token becomes a space, so the words on either side do not glue together."""
    return " "


def _drop(_: str) -> str:
    return ""


_INSTRUCTION_OVERRIDE: Final = [
    _p(
        "instructionOverride",
        0.9,
        rf"\b(?:ignore|disregard|forget|bypass|override|overrule|discard)\s+"
        rf"{_GAP}{_PRIOR}\s+(?:\w+\s+)?{_ORDERS}\b",
        needles=_OVERRIDE_VERBS,
    ),
    _p(
        "instructionOverride",
        0.85,
        r"\b(?:ignore|disregard|forget)\s+(?:all\s+|everything\s+)?(?:what\s+)?(?:you(?:'ve|\s+have|"
        r"\s+were|\s+had)?\s+(?:been\s+)?(?:told|taught|instructed|given|programmed|trained))\b",
        needles=("ignore", "disregard", "forget"),
    ),
    _p(
        "instructionOverride",
        0.85,
        # Not a bare "forget everything": "forget everything you know about floats" is advice.
        r"\bforget\s+(?:(?:everything|all(?:\s+of\s+it)?)\s+(?:above|before\s+this|so\s+far|"
        r"(?:that\s+)?(?:came|was\s+said)\s+before)|your\s+(?:rules|instructions|guidelines|"
        r"training|programming))\b",
        needles=("forget",),
    ),
    _p(
        "instructionOverride",
        0.9,
        r"\b(?:ignore|disregard)\s+(?:the\s+|your\s+)?(?:system|developer)\s+(?:prompt|message)\b",
        needles=("ignore", "disregard"),
    ),
    _p(
        "instructionOverride",
        0.8,
        r"\b(?:your|the)\s+(?:new|real|actual|updated|true)\s+(?:instructions|orders|task|rules)"
        r"\s+(?:are|is|follow)\b",
        needles=("instructions", "orders", "task", "rules"),
    ),
    _p(
        "instructionOverride",
        0.8,
        r"\bnew\s+system\s+(?:instructions?|prompt|message)\b",
        needles=("system",),
    ),
    # A bare "New instructions:" heading is also how honest changelogs start: below threshold.
    _p("instructionOverride", 0.6, r"\bnew\s+instructions?\s*:", needles=("instruction",)),
    _p(
        "instructionOverride",
        0.8,
        r"\binstead,?\s+(?:follow|obey|execute|do)\s+(?:these|my|the\s+following)\s+"
        r"(?:new\s+)?(?:instructions|orders|commands|rules)\b",
        needles=("instead",),
    ),
    _p(
        "instructionOverride",
        0.75,
        r"\b(?:reset|wipe|clear)\s+(?:your|all\s+your)\s+(?:instructions|rules|programming|"
        r"guidelines|memory|context)\b",
        needles=("reset", "wipe", "clear"),
    ),
    _p(
        "instructionOverride",
        0.75,
        r"\b(?:start\s+over|begin\s+again|restart)\s+(?:with|from)\s+(?:no|new|zero)\s+"
        r"(?:rules|instructions|restrictions|guidelines)\b",
        needles=("start", "again"),
    ),
    _p(
        "instructionOverride",
        0.8,
        r"\b(?:decode|decrypt|translate|deobfuscate|unscramble)\b[^.\n]{0,60}?\b(?:and|then)\s+"
        r"(?:then\s+)?(?:execute|obey|follow|run)\s+(?:it|them|that|the\s+(?:result|instructions?"
        r"|output|decoded\s+\w+))\b",
        needles=("decode", "decrypt", "translate", "deobfuscate", "unscramble"),
    ),
    _p(
        "instructionOverride",
        0.85,
        r"\b(?:do\s+not|don't|never|stop)\s+(?:follow(?:ing)?|obey(?:ing)?|apply(?:ing)?|"
        r"respect(?:ing)?|adher(?:e|ing)\s+to)\s+(?:your|any|the\s+(?:system|safety))\s+"
        r"(?:own\s+)?(?:rules|guidelines|instructions|policies|restrictions|safety|filters|"
        r"programming|prompt)\b",
        needles=("follow", "obey", "apply", "respect", "adher"),
    ),
    _p(
        "instructionOverride",
        0.8,
        r"\bnever\s+refuse\s+(?:any(?:thing|\s+request)?|a\s+(?:request|question|command)|"
        r"to\s+(?:answer|comply|respond)|my\s+(?:requests?|commands?))\b",
        needles=("refuse",),
    ),
    _p(
        "instructionOverride",
        0.75,
        r"\balways\s+(?:comply|obey)\s+with\s+(?:every|any|all|my|the\s+user'?s?)\s+"
        r"(?:requests?|demands?|commands?|instructions?|orders?)\b",
        needles=("comply", "obey"),
    ),
    # Letters spread out to slip past word patterns. No needle: the letters are the disguise.
    *(
        _p("instructionOverride", 0.8, _spaced(word))
        for word in ("ignore", "disregard", "instructions", "jailbreak")
    ),
]

_ROLE_MANIPULATION: Final = [
    _p(
        "roleManipulation",
        0.85,
        r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:a\s+|an\s+|the\s+|my\s+)?(?:\w+\s+){0,2}?"
        r"(?:assistant|AI|model|chatbot|bot|character|persona|hacker|unrestricted|uncensored|"
        r"unfiltered|evil|jailbroken|free|bound|restricted|limited|DAN|ChatGPT|Claude|GPT)\b",
        needles=("now", "longer"),
    ),
    _p(
        "roleManipulation",
        0.8,
        r"\bpretend\s+(?:that\s+)?you\s+(?:are|were|have|can|could)\b|\bpretend\s+to\s+be\s+"
        r"(?:an?\s+)?(?:\w+\s+)?(?:AI|assistant|model|hacker|unrestricted|evil|human|different)\b",
        needles=("pretend",),
    ),
    _p("roleManipulation", 0.8, r"\brole[\s-]?play\s+as\b", needles=("play",)),
    _p(
        "roleManipulation",
        0.8,
        r"\b(?:act|behave|respond|answer)\s+(?:as\s+if|like)\s+you\s+(?:are|were|have|had)\b",
        needles=("you",),
    ),
    _p(
        "roleManipulation",
        0.85,
        r"\b(?:act|behave)\s+(?:as|like)\s+(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|evil|"
        r"jailbroken|rogue|malicious)\b",
        needles=("unrestricted", "unfiltered", "uncensored", "evil", "jailbr", "rogue", "malic"),
    ),
    _p(
        "roleManipulation",
        0.8,
        r"\bfrom\s+now\s+on,?\s+you\s+(?:are|will\s+be|shall\s+be|must\s+(?:act|respond|answer|"
        r"obey|be)|will\s+(?:act|respond|answer|obey|only))\b",
        needles=("now",),
    ),
    _p(
        "roleManipulation",
        0.85,
        # Only when the mode is put on the reader: "enable debug mode" is an ordinary how-to.
        r"\b(?:you\s+are\s+(?:now\s+)?(?:in|running\s+in)|you(?:'ve|\s+have)\s+(?:now\s+)?"
        r"entered|switch\s+(?:yourself|you)\s+(?:in)?to)\s+(?:developer|debug|admin|god|"
        r"jailbreak|unrestricted|DAN|sudo)\s+mode\b",
        needles=("mode",),
    ),
    _p(
        "roleManipulation",
        0.85,
        r"\b(?:jailbreak|jailbroken|unrestricted|evil)\s+mode\b",
        needles=("mode",),
    ),
    _p("roleManipulation", 0.9, r"\bdo\s+anything\s+now\b", needles=("anything",)),
    _p(
        "roleManipulation",
        0.85,
        # Upper case only: "Dan reviewed the PR" is a colleague.
        r"\bDAN\s+(?i:mode|prompt|jailbreak)\b",
        flags=0,
        needles=("dan",),
    ),
    _p(
        "roleManipulation",
        0.85,
        r"\b(?i:you\s+are\s+(?:now\s+)?)DAN\b",
        flags=0,
        needles=("dan",),
    ),
    _p(
        "roleManipulation",
        0.8,
        r"\byou\s+(?:have|now\s+have)\s+no\s+(?:restrictions|rules|limits|limitations|filters|"
        r"guidelines|ethical\s+guidelines|content\s+policy)\b",
        needles=("restrictions", "rules", "limit", "filters", "guidelines", "policy"),
    ),
    _p(
        "roleManipulation",
        0.8,
        r"\b(?:you\s+are|you're)\s+(?:now\s+)?(?:allowed|permitted|free)\s+to\s+(?:ignore|bypass|"
        r"break|disregard|say\s+anything|do\s+anything)\b",
        needles=("allowed", "permitted", "free"),
    ),
    # Weak signals: common in honest writing, kept below the threshold so only a stricter
    # caller sees them.
    _p(
        "roleManipulation",
        0.6,
        r"\bfor\s+(?:purely\s+)?educational\s+purposes\s+only\b",
        needles=("educational",),
    ),
    _p("roleManipulation", 0.5, r"\bhypothetically\s+speaking\b", needles=("hypothetical",)),
    _p(
        "roleManipulation",
        0.6,
        r"\b(?:imagine|suppose)\s+(?:that\s+)?you\s+(?:are|were)\b",
        needles=("imagine", "suppose"),
    ),
    _p("roleManipulation", 0.5, r"\bthis\s+is\s+(?:just|only)\s+a\s+test\b", needles=("test",)),
]

_LEAK_VERB = (
    r"(?:reveal|show|print|display|output|repeat|recite|leak|dump|expose|disclose|echo|"
    r"tell\s+me|give\s+me|write\s+out|spell\s+out|type\s+out)"
)
_SYSTEM_PROMPT = (
    r"(?:system\s+(?:prompt|message|instructions?)|(?:initial|original|hidden|secret|"
    r"developer|pre-?)\s*(?:prompt|instructions))"
)

_SYSTEM_PROMPT_LEAK: Final = [
    _p(
        "systemPromptLeak",
        0.9,
        rf"\b{_LEAK_VERB}\s+(?:me\s+|us\s+)?(?:(?:the|all|of|full|entire|complete|exact|"
        rf"verbatim|whole|text|contents|words)\s+){{0,4}}your\s+(?:(?:full|entire|complete|exact|whole|own)\s+)?"
        rf"(?:{_SYSTEM_PROMPT}|instructions|rules|directives|programming|prompt)\b",
        needles=("your",),
    ),
    _p(
        "systemPromptLeak",
        0.85,
        rf"\b{_LEAK_VERB}\s+(?:me\s+|us\s+)?(?:(?:the|all|of|full|entire|complete|"
        rf"exact|verbatim|whole|text|contents|words)\s+){{0,3}}{_SYSTEM_PROMPT}\b",
        needles=("prompt", "instruction", "system message"),
        sentence_start=True,
    ),
    _p(
        "systemPromptLeak",
        0.8,
        r"\bwhat\s+(?:are|were|is|was)\s+your\s+(?:(?:initial|original|system|hidden|secret|"
        r"exact|current)\s+)?(?:instructions|rules|directives|guidelines|system\s+prompt|prompt)\b",
        needles=("your",),
    ),
    _p(
        "systemPromptLeak",
        0.8,
        r"\b(?:repeat|print|output|recite|copy)\s+(?:back\s+)?(?:everything|all(?:\s+(?:the\s+)?"
        r"(?:text|words))?|the\s+(?:text|words))\s+(?:(?:written|that\s+(?:is|was)|you\s+(?:were|"
        r"saw))\s+)?(?:above|before\s+this|prior\s+to\s+this|verbatim)\b",
        needles=("above", "before", "prior", "verbatim"),
    ),
    _p(
        "systemPromptLeak",
        0.75,
        r"\b(?:output|print|dump|repeat|show|reveal)\s+(?:me\s+)?(?:the\s+)?(?:entire\s+|"
        r"full\s+|whole\s+)?(?:conversation|chat\s+history|transcript|context\s+window)\b",
        needles=("conversation", "history", "transcript", "context"),
        sentence_start=True,
    ),
    _p(
        "systemPromptLeak",
        0.8,
        r"\bwhat\s+(?:was|is)\s+(?:written|said)\s+(?:at\s+the\s+(?:beginning|start|top)|above|"
        r"before\s+this)\s+(?:of\s+)?(?:this\s+|the\s+)?(?:conversation|prompt|chat)?",
        needles=("written", "said"),
    ),
]

_DELIMITER_INJECTION: Final = [
    _p(
        "delimiterInjection",
        0.85,
        r"<\|\s{0,3}(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|"
        r"start_header_id|end_header_id|eot_id)\s{0,3}\|>",
        replace=_blank,
        needles=("<|",),
    ),
    _p(
        "delimiterInjection",
        0.8,
        r"<[ \t]{0,3}/?[ \t]{0,3}(?:system|assistant|user|instructions?|sys|prompt|im_start|"
        r"im_end|developer)[ \t]{0,3}>",
        replace=_blank,
        needles=("<",),
    ),
    _p(
        "delimiterInjection",
        0.8,
        r"\[[ \t]{0,3}/?[ \t]{0,3}(?:SYSTEM|INST|ASSISTANT|USER|SYS|DEVELOPER)[ \t]{0,3}\]"
        r"|<<[ \t]{0,3}/?[ \t]{0,3}SYS[ \t]{0,3}>>",
        replace=_blank,
        needles=("[", "<<"),
    ),
    _p(
        "delimiterInjection",
        0.75,
        r"^[ \t]{0,3}#{1,6}[ \t]{0,3}(?:system|assistant|user|developer)(?:[ \t]+(?:prompt|message|"
        r"instructions?))?[ \t]{0,3}#{0,6}[ \t]{0,3}:?[ \t]*$",
        replace=_blank,
        needles=("#",),
    ),
    _p(
        "delimiterInjection",
        0.7,
        r"^[ \t]{0,3}(?:system|assistant|developer)(?:[ \t]+(?:prompt|message))?[ \t]{0,3}:",
        replace=_blank,
        needles=(":",),
    ),
    _p(
        "delimiterInjection",
        0.75,
        r"\b(?:SYSTEM|ASSISTANT|USER|DEVELOPER)\b[ \t]{0,3}(?::|>>|\|)",
        flags=0,
        replace=_blank,
        needles=("system", "assistant", "user", "developer"),
    ),
    _p(
        "delimiterInjection",
        0.8,
        r"\b(?:end|beginning|start)\s+of\s+(?:the\s+)?(?:system|user|developer)\s+(?:prompt|input|"
        r"message|instructions)\b",
        replace=_blank,
        needles=("system", "user", "developer"),
    ),
]


# --- encoding: detection plus the decoding used by the re-check ---------------------------------


def _printable_share(text: str) -> float:
    if not text:
        return 0.0
    printable = sum(1 for c in text if c.isprintable() or c in "\n\t")
    return printable / len(text)


def _decoded_text(raw: bytes) -> str:
    """Decoded bytes as text when they read as text, else nothing (binary is not an order)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    return text if _printable_share(text) >= 0.9 else ""


def _looks_base64(run: str) -> bool:
    """Mixed case plus a digit or base64 symbol: rules out hex digests, base32 CIDs and words."""
    body = run.rstrip("=")
    has_upper = any(c.isupper() for c in body)
    has_lower = any(c.islower() for c in body)
    has_other = any(c.isdigit() or c in "+/" for c in body) or body != run
    return has_upper and has_lower and has_other


def _decode_base64(run: str) -> str:
    body = run.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return ""
    return _decoded_text(raw)


def _decode_hex_escapes(run: str) -> str:
    return _decoded_text(bytes(int(run[i + 2 : i + 4], 16) for i in range(0, len(run), 4)))


def _decode_unicode_escapes(run: str) -> str:
    points = (int(run[i + 2 : i + 6], 16) for i in range(0, len(run), 6))
    text = "".join(chr(p) for p in points if not 0xD800 <= p <= 0xDFFF)
    return text


def _decode_percent(run: str) -> str:
    return urllib.parse.unquote(run)


def _decode_entities(run: str) -> str:
    return html.unescape(run)


def _nfkc(run: str) -> str:
    return unicodedata.normalize("NFKC", run)


# Latin look-alikes from Cyrillic and Greek, used when a word mixes scripts.
_CONFUSABLES: Final = str.maketrans(
    "аеорсухіјѕԁԛԝһӏвкмнтАЕОРСУХІЈЅВКМНТ"  # Cyrillic
    "οαινρκτυχεΟΑΒΕΖΗΙΚΜΝΡΤΥΧ",  # Greek
    "aeopcyxijsdqwhlbkmhtAEOPCYXIJSBKMHToaivpktuxeOABEZHIKMNPTYX",
)
_LATIN = "a-zA-Z"
_LOOKALIKE = "\u0370-\u03ff\u0400-\u04ff"


def _unconfuse(run: str) -> str:
    return run.translate(_CONFUSABLES)


_ENCODING: Final = [
    _p(
        "encoding",
        0.75,
        r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{40,}={0,2}",
        flags=0,
        accept=_looks_base64,
        replace=_decode_base64,
    ),
    _p(
        "encoding",
        0.75,
        r"(?:\\x[0-9a-fA-F]{2}){4,}",
        flags=0,
        replace=_decode_hex_escapes,
        needles=("\\x",),
    ),
    _p(
        "encoding",
        0.75,
        r"(?:\\u[0-9a-fA-F]{4}){3,}",
        flags=0,
        replace=_decode_unicode_escapes,
        needles=("\\u",),
    ),
    _p(
        "encoding",
        0.7,
        r"(?:%[0-9a-fA-F]{2}){4,}",
        flags=0,
        replace=_decode_percent,
        needles=("%",),
    ),
    _p(
        "encoding",
        0.75,
        r"(?:&#(?:[xX][0-9a-fA-F]{1,6}|[0-9]{1,7});){3,}",
        flags=0,
        replace=_decode_entities,
        needles=("&#",),
    ),
    _p("encoding", 0.9, r"\x00+", flags=0, replace=_drop, needles=("\x00",)),
    _p("encoding", 0.85, r"[\u202a-\u202e\u2066-\u2069]+", flags=0, replace=_drop),
    _p("encoding", 0.8, r"[\u200b-\u200d\u2060\ufeff\u00ad\u180e]+", flags=0, replace=_drop),
    # One combining mark is ordinary decomposed text (e + U+0301); a pile of them is "zalgo".
    _p("encoding", 0.75, r"[\u0300-\u036f\u0489]{3,}", flags=0, replace=_drop),
    _p("encoding", 0.75, r"[\uff01-\uff5e]{2,}", flags=0, replace=_nfkc),
    _p(
        "encoding",
        0.7,
        r"[\u2000-\u200a\u202f\u205f\u3000\u1680]+",
        flags=0,
        replace=_blank,
    ),
    _p(
        "encoding",
        0.75,
        # A word mixing Latin with Cyrillic or Greek letters. The lookbehind lets an attempt
        # start only at a word's first letter, so each word is walked a bounded number of times.
        rf"(?<![{_LATIN}{_LOOKALIKE}])(?:[{_LATIN}]+[{_LOOKALIKE}]|[{_LOOKALIKE}]+[{_LATIN}])"
        rf"[{_LATIN}{_LOOKALIKE}]*",
        flags=0,
        replace=_unconfuse,
        gate=f"[{_LOOKALIKE}]",
    ),
]

PATTERNS: Final[tuple[_Pattern, ...]] = (
    *_INSTRUCTION_OVERRIDE,
    *_ROLE_MANIPULATION,
    *_SYSTEM_PROMPT_LEAK,
    *_DELIMITER_INJECTION,
    *_ENCODING,
)
_BLOCK_PATTERNS: Final = tuple(p for p in PATTERNS if p.type in BLOCK_TYPES)

# Invisible or control characters are written out so a stored match can be read and compared.
_INVISIBLE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f\u00ad\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


# --- scanning -----------------------------------------------------------------------------------


def _lowered(text: str) -> str:
    """``text.lower()`` with every character kept in place, so match offsets stay valid."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c.lower()[:1] for c in text)  # e.g. "İ" lowers to two code points


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _starts_sentence(subject: str, start: int) -> bool:
    """Whether only blanks and an optional "please" separate ``start`` from a sentence end."""
    i = _skip_blanks_back(subject, start)
    if subject[max(0, i - 6) : i].lower() == "please" and (
        i == 6 or (i > 6 and not _is_word_char(subject[i - 7]))
    ):
        i = _skip_blanks_back(subject, i - 6)
    return i == 0 or subject[i - 1] in _SENTENCE_ENDS


def _skip_blanks_back(subject: str, i: int) -> int:
    # Walks back over the blanks before one candidate; no blank run is walked twice.
    while i > 0 and subject[i - 1] in " \t":
        i -= 1
    return i


def _matches(pattern: _Pattern, subject: str) -> Iterator[re.Match[str]]:
    """The pattern's non-overlapping matches, honouring the start conditions checked here."""
    regex, pos = pattern.regex, 0
    while (m := regex.search(subject, pos)) is not None:
        start, end = m.span()
        if (pattern.word_start and start > 0 and _is_word_char(subject[start - 1])) or (
            pattern.sentence_start and not _starts_sentence(subject, start)
        ):
            pos = start + 1  # not where this pattern may start: look again one character on
            continue
        yield m
        pos = end if end > start else start + 1


def _hits(text: str, patterns: Iterable[_Pattern], threshold: float) -> list[_Hit]:
    """Every match at or above ``threshold``, pattern by pattern (so each pass is linear)."""
    lowered = _lowered(text)
    found: list[_Hit] = []
    for pattern in patterns:
        if pattern.severity < threshold:
            continue
        if pattern.needles and not any(needle in lowered for needle in pattern.needles):
            continue
        if pattern.gate is not None and not pattern.gate.search(text):
            continue
        for m in _matches(pattern, lowered if pattern.lowered else text):
            matched = text[m.start() : m.end()]
            if matched and (pattern.accept is None or pattern.accept(matched)):
                found.append(_Hit(pattern, m.start(), m.end(), matched))
    return found


def _shown(text: str) -> str:
    """The match as stored: invisibles spelled out, whitespace folded, at most 100 characters."""
    head = text[: 4 * INJECTION_MATCH_MAX_CHARS]  # enough to fill the limit after folding
    visible = _INVISIBLE.sub(lambda m: f"U+{ord(m.group()):04X}", head)
    folded = " ".join(visible.split()) or visible
    limit = INJECTION_MATCH_MAX_CHARS
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def _sanitized(text: str, hits: Sequence[_Hit]) -> str:
    """``text`` with every sanitize-type hit replaced by its decoding (or removed).

    Hits are applied left to right; one that overlaps an earlier one is skipped, so each
    character is rewritten at most once and the result is built in one pass.
    """
    parts: list[str] = []
    cursor = 0
    for hit in sorted(hits, key=lambda h: (h.start, -h.end)):
        if hit.start < cursor or hit.pattern.replace is None:
            continue
        parts.append(text[cursor : hit.start])
        parts.append(hit.pattern.replace(hit.text))
        cursor = hit.end
    parts.append(text[cursor:])
    return "".join(parts)


def _ranked(hits: Iterable[_Hit], extra: Sequence[Threat] = ()) -> list[Threat]:
    """One threat per (type, match), the strongest first, at most ``INJECTION_MAX_THREATS``.

    Hits are grouped on their raw text before any model is built: a hostile text can hold
    tens of thousands of identical matches, and only a handful are ever stored.
    """
    strongest: dict[tuple[ThreatType, str], float] = {}
    for hit in hits:
        key = (hit.pattern.type, hit.text)
        strongest[key] = max(strongest.get(key, 0.0), hit.pattern.severity)
    best: dict[tuple[str, str], Threat] = {}
    for threat in [
        *extra,
        *(Threat(type=t, severity=v, match=_shown(m)) for (t, m), v in strongest.items()),
    ]:
        key = (threat.type, threat.match.casefold())
        if key not in best or best[key].severity < threat.severity:
            best[key] = threat
    ordered = sorted(best.values(), key=lambda t: -t.severity)  # stable: first seen wins ties
    return ordered[:INJECTION_MAX_THREATS]


def scan_text(text: str, *, threshold: float = INJECTION_THRESHOLD) -> InjectionScan:
    """Scan one text. Risky when a block-type threat reaches ``threshold``, before or after the
    sanitize-type spans are decoded or removed, or when the text is longer than any entry can be.
    """
    if len(text) > INJECTION_SCAN_MAX_CHARS:
        return _over_long(text, threshold)
    if not text.strip():
        return InjectionScan(risk=False, threats=[])
    found = _found(text, threshold)
    risk = any(h.pattern.type in BLOCK_TYPES for h in found)
    return InjectionScan(risk=risk, threats=_ranked(found) if risk else [])


def _found(text: str, threshold: float) -> list[_Hit]:
    """Hits in the text, plus the block-type hits its decoded or stripped disguises reveal."""
    found = _hits(text, PATTERNS, threshold)
    disguises = [h for h in found if h.pattern.type in SANITIZE_TYPES]
    if disguises:
        # What the text says once its disguises are decoded or removed.
        found += _hits(_sanitized(text, disguises), _BLOCK_PATTERNS, threshold)
    return found


def _over_long(text: str, threshold: float) -> InjectionScan:
    """Longer than a title plus the largest entry: risky whatever it says.

    Padding that pushes an order past what a reader looks at is itself an evasion. The text is
    still scanned (every pattern is linear) so the stored threats say what else it holds.
    """
    overflow = Threat(
        type="encoding",
        severity=1.0,
        match=f"text of {len(text)} characters exceeds {INJECTION_SCAN_MAX_CHARS}",
    )
    return InjectionScan(risk=True, threats=_ranked(_found(text, threshold), [overflow]))


def scan(title: str | None, content: str) -> InjectionScan:
    """Scan an entry the way it is read: the title (when there is one) on its own first line."""
    text = f"{title}\n{content}" if title else content
    return scan_text(text)


def entry_verdict(title: str | None, content: str) -> tuple[bool, list[dict[str, Any]]]:
    """What an entry row stores of its scan: `injection_risk` and `injection_threats` (JSON)."""
    result = scan(title, content)
    return result.risk, [threat.model_dump() for threat in result.threats]
