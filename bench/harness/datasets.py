"""The public multi-hop dev sets of ``../shared/data`` as (questions, pooled passages) for bench/suites/retrieval.py."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.results import DATA as DATA_ROOT

# name -> (question files under the data root with their sentence joiner, pooled corpus file); the names are a
# contract (--sets, the records' "set", the report's columns)
SETS: dict[str, tuple[tuple[tuple[str, str], ...], str | None]] = {
    "hotpotqa": ((("hotpotqa_hipporag100/hotpotqa_train.json", ""),),
                 "hotpotqa_hipporag100/hotpotqa_train_corpus.json"),
    "musique": ((("musique_dev/kag_musique_qa_100.json", ""), ("musique_dev/migres_musique_200.jsonl", "")), None),
    "2wiki": ((("2wikimultihopqa_dev/migres_wikihop_200.jsonl", " "),), None),
    "quickstart": ((("hoprag_quickstart/hotpot_example.jsonl", ""), ("hoprag_quickstart/musique_example.jsonl", ""),
                    ("hoprag_quickstart/wiki_example.jsonl", " ")), None),
}


@dataclass
class Dataset:
    name: str
    questions: list[dict]  # the records, each with "qid", "gold" (passage keys), "answers" and "source" (file stem)
    passages: dict[str, str]  # passage key -> text
    titles: dict[str, str] = field(default_factory=dict)  # passage key -> title
    skipped: dict[str, int] = field(default_factory=dict)  # "no_passages" / "duplicate_id" -> count

    @property
    def docs(self) -> dict[str, str]:
        """Passage key -> the document ingested for it, ``"<title>\\n<text>"``."""
        return {k: f"{self.titles.get(k, k)}\n{t}" for k, t in self.passages.items()}


def norm(text: str) -> str:
    """Lower-cased word tokens: contexts quote passages as CSV cells or reflow whitespace, which must not hide a
    passage that is there."""
    return " ".join(re.findall(r"\w+", text.lower()))


def read_records(path: Path) -> list[dict] | dict:
    """A JSON document, or JSON lines (one question per line)."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


class _Passages:
    """Passage keys: the title, or ``title [n]`` when another passage with that title has other text
    (MuSiQue repeats titles across paragraphs; a pooled set may hold one title in two datasets)."""

    def __init__(self) -> None:
        self.text: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        self.keys: dict[tuple[str, str], str] = {}
        self._count: dict[str, int] = {}

    def add(self, title: str, text: str) -> str:
        if (title, text) not in self.keys:
            n = self._count[title] = self._count.get(title, 0) + 1
            key = title if n == 1 else f"{title} [{n}]"
            self.keys[(title, text)], self.text[key], self.titles[key] = key, text, title
        return self.keys[(title, text)]


def _joined(sents: str | list[str], join: str) -> str:
    return sents if isinstance(sents, str) else join.join(sents)


def _question_passages(q: dict, join: str = "") -> list[tuple[str, str, bool]]:
    """(title, text, is gold) of a question's own passages; sentences joined with ``join``."""
    if "paragraphs" in q:
        return [(p["title"], p["paragraph_text"], bool(p.get("is_supporting"))) for p in q["paragraphs"]]
    gold = {title for title, _idx in q.get("supporting_facts", [])}
    return [(title, _joined(sents, join), title in gold) for title, sents in q.get("context") or []]


def gold_answers(q: dict) -> list[str]:
    """The record's answer (a string, or a list of them) and its ``answer_aliases`` (MuSiQue), as given."""
    answer, aliases = q.get("answer"), q.get("answer_aliases") or []
    answers = answer if isinstance(answer, list) else [answer]
    return [a for a in (*answers, *aliases) if isinstance(a, str)]


def load_files(files: list[tuple[Path, str]], corpus: Path | None = None, name: str = "custom") -> Dataset:
    """Questions of every file (deduplicated by id, first file wins), pooled passages keyed by (title, text).
    With a corpus file (``{title: [sentences]}`` or ``[{title, text}]``) the corpus is the passages and
    gold passages are matched by title and text, else by title."""
    passages = _Passages()
    if corpus is not None:
        raw = read_records(corpus)
        items = raw.items() if isinstance(raw, dict) else ((p["title"], p.get("sentences") or p["text"]) for p in raw)
        for title, sents in items:
            passages.add(title, _joined(sents, ""))
    questions: list[dict] = []
    seen: set[str] = set()
    skipped = {"no_passages": 0, "duplicate_id": 0}
    for path, join in files:
        for i, q in enumerate(read_records(path)):
            qid = str(q.get("_id") or q.get("id") or f"{path.stem}:{i}")
            own = _question_passages(q, join)
            if not own or qid in seen:
                skipped["duplicate_id" if own else "no_passages"] += 1
                continue
            seen.add(qid)
            keys = [passages.add(t, x) if corpus is None else passages.keys.get((t, x), t) for t, x, _ in own]
            gold = sorted({key for key, (_t, _x, is_gold) in zip(keys, own, strict=True) if is_gold})
            questions.append({**q, "qid": qid, "source": path.stem, "gold": gold, "answers": gold_answers(q)})
    return Dataset(name, questions, passages.text, passages.titles, skipped)


def load_named_set(name: str, data_root: Path = DATA_ROOT) -> Dataset:
    files, corpus = SETS[name]
    return load_files([(data_root / rel, join) for rel, join in files], data_root / corpus if corpus else None,
                      name=name)

