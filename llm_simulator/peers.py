"""Answers to nano-graphrag's and LightRAG's own prompts, in the formats their parsers expect.

The side-by-side benchmark (docs/benchmarks.md, "graphfleet vs nano-graphrag vs LightRAG") runs graphfleet,
nano-graphrag 0.0.8.x and LightRAG 1.5.x against one simulator. Each peer's prompt is recognised by a phrase of
its template (read from the installed packages' ``prompt.py``), its data is cut out of the template, and the answer
comes from the same deterministic rules the project's own prompts get (``extraction.records_of``,
``answers.summarize`` ...), rendered in the peer's record format. So the three systems build their
graphs from the same simulated model and differ only in how they use it.
"""

from __future__ import annotations

import json
import re

from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP

from . import answers
from .extraction import DEFAULT_TYPES, emitted_keys, glean_pool_of, glean_records_of, records_of, render
from .textutil import section

# kind -> a phrase of the peer's template. Gleaning prompts are matched on the last user message only.
NANO = (
    ("nano_glean_continue", "MANY entities were missed in the last extraction"),
    ("nano_glean_loop", "It appears some entities may have still been missed"),
    ("nano_extract", "identify all entities of those types from the text and all relationships among"),
    ("nano_summarize", "Please concatenate all of these into a single, comprehensive description"),
    ("nano_community_report", "Write a comprehensive report of a community"),
    ("nano_global_map", "Generate a response consisting of a list of key points"),
    ("nano_global_reduce", "synthesizing perspectives from multiple analysts"),
    ("nano_local", "You are a helpful assistant responding to questions about data in the tables provided"),
    ("nano_naive", "Below are the knowledge you know:"),
)
LIGHTRAG = (
    ("lightrag_glean", "Based on the last extraction task, identify and extract any missed"),
    ("lightrag_extract", "You are a Knowledge Graph Specialist responsible for extracting entities"),
    ("lightrag_summarize", "synthesize a list of descriptions of a given entity or relation"),
    ("lightrag_keywords", "You are an expert keyword extractor"),
    ("lightrag_rag", "integrate relevant facts from the Knowledge Graph and Document Chunks"),
    ("lightrag_naive", "integrate relevant facts from the Document Chunks"),
)
MARKERS = NANO + LIGHTRAG
LAST_USER_ONLY = frozenset({"nano_glean_continue", "nano_glean_loop", "lightrag_glean"})
TYPES = tuple(kind for kind, _ in MARKERS)
_MARKER = dict(MARKERS)

LR_TUPLE = "<|#|>"
LR_COMPLETE = "<|COMPLETE|>"
_LR_EMITTED = re.compile(r"^\s*entity" + re.escape(LR_TUPLE) + r"(.*?)" + re.escape(LR_TUPLE), re.MULTILINE)
_NANO_TUPLE = "<|>"


# ---- nano-graphrag ---------------------------------------------------------------------------------

def nano_text_and_types(prompt: str) -> tuple[str, tuple[str, ...]]:
    """The chunk and entity types of nano-graphrag's ``entity_extraction`` prompt (its ``-Real Data-`` part)."""
    real = prompt[prompt.rfind("-Real Data-"):] if "-Real Data-" in prompt else prompt
    m = re.search(r"^Entity_types:\s*(.*)$", real, re.MULTILINE)
    types = tuple(t.strip(" []'\"") for t in m.group(1).split(",")) if m else DEFAULT_TYPES
    start = real.find("Text: ")
    end = real.rfind("\n######################\nOutput:")
    if start < 0:
        return "", types
    return real[start + len("Text: "): end if end > start else None], tuple(t for t in types if t) or DEFAULT_TYPES


def _synth(header: str, data: str, response_type: str = "") -> str:
    """A data block in the shape :mod:`answers` reads (its own prompts' section headers)."""
    rt = f"-Target response format-\n{response_type}\n-\n" if response_type else ""
    return f"{rt}{header}\n{data}\n"


def _between(text: str, start: str, end: str) -> str:
    i = text.find(start)
    if i < 0:
        return ""
    body = text[i + len(start):]
    j = body.find(end)
    return (body[:j] if j >= 0 else body).strip()


def _summary(name: str, fragments: list[str], max_tokens: int, model: str | None) -> str:
    """The project's summary rule on a peer's description list."""
    return answers.summarize(f"Write it under {max_tokens} tokens.\nEntity: {name}\nDescription fragments:\n"
                             + "\n".join(fragments) + "\nOutput:", model)


def _nano_response_type(system: str) -> str:
    return section(system, "---Target response length and format---", ("\n---", "\nAdd "))


def _nano(kind: str, conv, model: str | None) -> str:
    system = conv.system()
    question = conv.last_user()
    if kind == "nano_extract":
        return render(records_of(*nano_text_and_types(conv.with_marker(_MARKER[kind]))))
    if kind in ("nano_glean_continue", "nano_glean_loop"):
        text, types = nano_text_and_types(conv.with_marker(_MARKER["nano_extract"]))
        pool = glean_pool_of(text, types, emitted_keys(conv.assistant_texts()))
        if kind == "nano_glean_loop":
            return "YES" if text and pool[2] else "NO"
        return render(glean_records_of(*pool))
    if kind == "nano_summarize":
        prompt = conv.with_marker(_MARKER[kind])
        name = _between(prompt, "Entities:", "\n")
        fragments = _between(prompt, "Description List:", "\n#######").split(GRAPH_FIELD_SEP)
        return _summary(name, fragments, 500, model)
    if kind == "nano_community_report":
        real = conv.with_marker(_MARKER[kind]).split("# Real Data", 1)[-1]
        data = _between(real, "Text:", "The report should include")  # fence lines are skipped by the parser
        return answers.community_report(f"-Data-\n{data}\nOutput:")
    if kind == "nano_global_map":
        return answers.global_map(_synth("-Data-", _between(system, "---Data tables---", "---Goal---")), question)
    rt = _nano_response_type(system)
    if kind == "nano_global_reduce":
        data = _between(system, "---Analyst Reports---", "---Goal---")
        return answers.answer("global_reduce", _synth("-Analyst reports-", data, rt), question)
    if kind == "nano_local":
        data = _between(system, "---Data tables---", "---Goal---")
        return answers.answer("rag_answer", _synth("-Data tables-", data, rt), question)
    data = _between(system, "Below are the knowledge you know:", "\n---\n")
    return answers.answer("naive_answer", _synth("-Excerpts-", data, rt), question)


# ---- LightRAG --------------------------------------------------------------------------------------

def lightrag_types(system: str) -> tuple[str, ...]:
    """Entity types named in the ``---Entity Types---`` guidance (``- Person: ...`` lines)."""
    at = system.rfind("---Entity Types---\n")  # the section itself, not its mentions in the instructions
    body = _between(system[at:], "---Entity Types---", "\n---") if at >= 0 else ""
    types = tuple(m.group(1) for m in re.finditer(r"^\s*-\s*([A-Za-z][\w ]*?)\s*:", body, re.MULTILINE))
    return types or DEFAULT_TYPES


def lightrag_text(user: str) -> str:
    start = user.rfind("---Input Text---\n```\n")
    if start < 0:
        return ""
    body = user[start + len("---Input Text---\n```\n"):]
    end = body.rfind("\n```")
    return body[:end] if end >= 0 else body


def lightrag_caps(prompt: str) -> tuple[int, int]:
    """(total rows, entity rows) the prompt allows; generous when absent."""
    m = re.search(r"at most (\d+) total rows and at most (\d+) entity rows", prompt)
    return (int(m.group(1)), int(m.group(2))) if m else (1000, 1000)


def to_lightrag(records: list[str], caps: tuple[int, int]) -> str:
    """graphfleet/nano records -> LightRAG rows: ``entity<|#|>name<|#|>type<|#|>desc`` and
    ``relation<|#|>src<|#|>tgt<|#|>keywords<|#|>desc``, entities first, within the row caps."""
    total_cap, entity_cap = caps
    ents, rels = [], []
    for rec in records:
        fields = rec.strip()[1:-1].split(_NANO_TUPLE)
        if fields[0] == '"entity"' and len(fields) >= 4:
            ents.append(LR_TUPLE.join(["entity", fields[1], fields[2], fields[3]]))
        elif fields[0] == '"relationship"' and len(fields) >= 5:
            rels.append((fields[1], fields[2], LR_TUPLE.join(["relation", fields[1], fields[2], fields[4], fields[3]])))
    ents = ents[:entity_cap]
    kept = {row.split(LR_TUPLE)[1].upper() for row in ents}
    rows = ents + [row for src, tgt, row in rels if src.upper() in kept or tgt.upper() in kept]
    return "\n".join(rows[:total_cap] + [LR_COMPLETE])


def _lightrag_emitted(texts: list[str]) -> set[str]:
    return {m.strip().upper() for text in texts for m in _LR_EMITTED.findall(text)}


def _lightrag(kind: str, conv, model: str | None) -> str:
    system = conv.system()
    question = conv.last_user()
    if kind in ("lightrag_extract", "lightrag_glean"):
        user = next((t for r, t in conv.messages if r == "user" and "---Input Text---" in t), "")
        text, types = lightrag_text(user), lightrag_types(system)
        caps = lightrag_caps(question)
        if kind == "lightrag_extract":
            return to_lightrag(records_of(text, types), caps)
        pool = glean_pool_of(text, types, _lightrag_emitted(conv.assistant_texts()))
        return to_lightrag(glean_records_of(*pool), caps)
    if kind == "lightrag_summarize":
        prompt = conv.with_marker(_MARKER[kind])
        m = re.search(r"^\s*\w+ Name:\s*(.+)$", prompt, re.MULTILINE)
        limit = re.search(r"must not exceed (\d+) tokens", prompt)
        fragments = []
        for line in _between(prompt, "Description List:", "---Output---").strip("`\n ").splitlines():
            line = line.strip().strip("`")
            if not line:
                continue
            try:
                item = json.loads(line)
                fragments.append(str(item.get("Description", item) if isinstance(item, dict) else item))
            except ValueError:
                fragments.append(line)
        return _summary(m.group(1).strip() if m else "", fragments, int(limit.group(1)) if limit else 500, model)
    if kind == "lightrag_keywords":
        prompt = conv.with_marker(_MARKER[kind])
        query = _between(prompt[prompt.rfind("---Real Data---"):], "User Query:", "\n---Output---")
        return answers.keywords(f"Question: {query}\nOutput:")
    m = re.search(r"The response should be presented in (.+?)\.?$", system, re.MULTILINE)
    data = section(system, "---Context---")
    header = "-Data tables-" if kind == "lightrag_rag" else "-Excerpts-"
    return answers.answer("rag_answer" if kind == "lightrag_rag" else "naive_answer",
                          _synth(header, data, m.group(1) if m else ""), question)


def respond(kind: str, conv, model: str | None) -> str:
    return _nano(kind, conv, model) if kind.startswith("nano_") else _lightrag(kind, conv, model)
