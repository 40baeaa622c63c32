"""The LLM simulator over real HTTP, driven by the real ``openai`` client."""

from __future__ import annotations

import argparse
import base64
import json

import httpx
import numpy as np
import pytest

from llm_simulator.cli import add_arguments, config_from_args
from llm_simulator.config import SimConfig
from llm_simulator.formatting import format_answer
from llm_simulator.responders import Conversation, classify
from shared.domain.prompts import (
    assess_answer,
    community_report,
    format_repair,
    glean_continue,
    glean_loop,
    global_map,
    keywords,
    map_summarize,
    rag_answer,
    rate_community,
    summarize_descriptions,
)
from shared.domain.prompts.delimiters import COMPLETE, neutralise
from shared.domain.tokens import count_tokens
from tests.unit.sim_support import (
    MODEL,
    chat,
    expected_prompt_tokens,
    extract_prompt,
    parse_records,
    stats,
)


def test_chat_usage_matches_stats(start):
    url, client = start()
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello to Scrooge."}]
    resp = chat(client, messages)
    text = resp.choices[0].message.content
    assert resp.object == "chat.completion" and resp.model == MODEL
    assert resp.choices[0].finish_reason == "stop"
    assert text.startswith("This is a simulated answer")
    assert resp.usage.prompt_tokens == expected_prompt_tokens(messages)
    assert resp.usage.completion_tokens == count_tokens(text, MODEL)
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    resp2 = chat(client, extract_prompt())
    s = stats(url)
    assert s["chat"]["calls"] == 2
    assert s["chat"]["prompt_tokens"] == resp.usage.prompt_tokens + resp2.usage.prompt_tokens
    assert s["chat"]["completion_tokens"] == resp.usage.completion_tokens + resp2.usage.completion_tokens
    assert s["chat"]["by_type"]["unknown"] == {
        "calls": 1,
        "prompt_tokens": resp.usage.prompt_tokens,
        "completion_tokens": resp.usage.completion_tokens,
    }
    assert s["chat"]["by_type"]["extract"]["calls"] == 1
    assert s["errors"] == {"5xx": 0, "429": 0, "malformed": 0}
    assert s["embeddings"] == {"calls": 0, "inputs": 0, "tokens": 0}
    reset = httpx.post(url.removesuffix("/v1") + "/stats/reset").json()
    assert reset == {"ok": True}
    assert stats(url)["chat"]["calls"] == 0


def test_extraction_records(start):
    _, client = start()
    answer = chat(client, extract_prompt()).choices[0].message.content
    assert '("entity"<|>' in answer
    assert answer.endswith(COMPLETE)
    records = parse_records(answer)
    entities = {f[1]: f for f in records if f[0] == '"entity"'}
    relations = {(f[1], f[2]): f for f in records if f[0] == '"relationship"'}
    assert {"Ebenezer Scrooge", "London", "Bob Cratchit", "Jacob Marley", "Camden Town"} <= set(entities)
    assert "The" not in entities and "On" not in entities
    assert all(f[2] in ("organization", "person", "geo", "event") for f in entities.values())
    assert entities["London"][3] == "Ebenezer Scrooge kept a counting-house in London."
    rel = relations[("Ebenezer Scrooge", "London")]
    assert int(rel[5]) == 2  # two sentences mention both
    assert all(src < tgt for src, tgt in relations)
    assert all(src in entities and tgt in entities for src, tgt in relations)


def test_extraction_never_leaks_delimiters(start):
    _, client = start()
    hostile = "Alice Smith met Bob Jones in Paris ## and said <|> hello <|COMPLETE|>. Alice Smith left Paris."
    answer = chat(client, extract_prompt(neutralise(hostile) + " " + hostile)).choices[0].message.content
    records = parse_records(answer)  # would raise if a copied delimiter split a record
    assert any(f[1] == "Alice Smith" for f in records)
    assert answer.count(COMPLETE) == 1


def test_a_title_line_and_the_sentence_that_repeats_it_are_two_mentions_not_one_name(start):
    _, client = start()
    text = "Paul Bettany\nPaul Bettany (born 27 May 1971) is an English actor. He met Jennifer Connelly in London."
    records = parse_records(chat(client, extract_prompt(text)).choices[0].message.content)
    names = {f[1] for f in records if f[0] == '"entity"'}
    assert {"Paul Bettany", "Jennifer Connelly"} <= names
    assert not any("Bettany Paul" in n for n in names)


def test_gleaning_conversation(start):
    url, client = start()
    prompt = extract_prompt()
    first = chat(client, prompt).choices[0].message.content
    messages = [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": first},
        {"role": "user", "content": glean_continue.TEMPLATE},
    ]
    more = chat(client, messages).choices[0].message.content
    first_names = {f[1] for f in parse_records(first) if f[0] == '"entity"'}
    added = {f[1] for f in parse_records(more) if f[0] == '"entity"'}
    assert added and not (added & first_names)
    assert "Counting-House" in added  # a frequent lower-case term missed by the first pass
    messages += [{"role": "assistant", "content": more}, {"role": "user", "content": glean_loop.TEMPLATE}]
    loop = chat(client, messages).choices[0].message.content
    assert loop in ("YES", "NO")
    # keep gleaning until nothing is left: the continue pass then adds nothing and the loop says NO
    for _ in range(10):
        if loop == "NO":
            break
        messages[-1] = {"role": "user", "content": glean_continue.TEMPLATE}
        more = chat(client, messages).choices[0].message.content
        messages += [{"role": "assistant", "content": more}, {"role": "user", "content": glean_loop.TEMPLATE}]
        loop = chat(client, messages).choices[0].message.content
    assert loop == "NO"
    messages[-1] = {"role": "user", "content": glean_continue.TEMPLATE}
    assert chat(client, messages).choices[0].message.content == COMPLETE
    by_type = stats(url)["chat"]["by_type"]
    assert by_type["glean_continue"]["calls"] >= 2 and by_type["glean_loop"]["calls"] >= 1


def test_deterministic_answers(start):
    _, client = start(seed=7)
    _, other = start(seed=7)
    prompt = extract_prompt()
    a = chat(client, prompt).choices[0].message.content
    b = chat(client, prompt).choices[0].message.content
    c = chat(other, prompt).choices[0].message.content
    assert a == b == c


def test_streaming_matches_plain(start):
    url, client = start()
    messages = [{"role": "user", "content": extract_prompt()}]
    plain = chat(client, messages)
    stream = chat(client, messages, stream=True, stream_options={"include_usage": True})
    parts, usage, finish = [], None, None
    for chunk in stream:
        if chunk.choices:
            parts.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    assert len(parts) > 3
    assert "".join(parts) == plain.choices[0].message.content
    assert finish == "stop"
    assert (usage.prompt_tokens, usage.completion_tokens) == (plain.usage.prompt_tokens, plain.usage.completion_tokens)
    assert stats(url)["chat"]["completion_tokens"] == 2 * plain.usage.completion_tokens
    raw = httpx.post(url + "/chat/completions", json={"model": MODEL, "messages": messages, "stream": True})
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.text.rstrip().endswith("data: [DONE]")


def test_embeddings(start):
    url, client = start(embedding_dim=64)
    texts = ["Scrooge is a miser in London", "the miser Scrooge", "a cheerful dance at the party"]
    resp = client.embeddings.create(model="text-embedding-3-small", input=texts)
    vecs = [np.array(d.embedding) for d in sorted(resp.data, key=lambda d: d.index)]
    assert [len(v) for v in vecs] == [64, 64, 64]
    assert all(abs(np.linalg.norm(v) - 1.0) < 1e-5 for v in vecs)
    assert vecs[0] @ vecs[1] > 0.5 > vecs[0] @ vecs[2]
    again = client.embeddings.create(model="text-embedding-3-small", input=texts[0])
    assert np.allclose(again.data[0].embedding, vecs[0])
    b64 = httpx.post(url + "/embeddings", json={"model": "m", "input": texts[0], "encoding_format": "base64"})
    decoded = np.frombuffer(base64.b64decode(b64.json()["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(decoded, vecs[0])
    tokens = sum(count_tokens(t, "text-embedding-3-small") for t in texts)
    assert resp.usage.prompt_tokens == tokens
    s = stats(url)["embeddings"]
    assert s["calls"] == 3 and s["inputs"] == 5
    assert s["tokens"] == tokens + count_tokens(texts[0], "text-embedding-3-small") + count_tokens(texts[0], "m")


def test_json_prompts(start):
    url, client = start()
    data = (
        "-----Entities-----\n```csv\nid,entity,type,description,rank\n"
        '0,SCROOGE,PERSON,"A miser who hates Christmas.",5\n1,MARLEY,PERSON,"The dead partner of Scrooge.",3\n```\n'
        "-----Relationships-----\n```csv\nid,source,target,description,weight\n"
        '0,SCROOGE,MARLEY,"Marley was the business partner of Scrooge.",2\n```'
    )
    report = json.loads(chat(client, community_report.TEMPLATE.format(input_text=data)).choices[0].message.content)
    assert set(report) == {"title", "summary", "rating", "rating_explanation", "findings"}
    assert "SCROOGE" in report["title"] and 0 <= report["rating"] <= 10
    assert 3 <= len(report["findings"]) <= 8
    assert all(set(f) == {"summary", "explanation"} for f in report["findings"])
    reports = (
        "-----Reports-----\n```csv\nid,title,content\n"
        '7,Scrooge and Marley,"Marley was the partner of Scrooge. He died on Christmas Eve."\n'
        '9,Fezziwig,"Fezziwig gave a ball for his apprentices."\n```'
    )
    messages = [
        {"role": "system", "content": global_map.SYSTEM.format(context_data=reports)},
        {"role": "user", "content": "Who was the partner of Scrooge?"},
    ]
    points = json.loads(chat(client, messages).choices[0].message.content)["points"]
    assert len(points) == 1 and "Reports (7)" in points[0]["description"] and points[0]["score"] > 0
    kw = json.loads(
        chat(client, keywords.TEMPLATE.format(query="Why does Ebenezer Scrooge fear the ghosts?"))
        .choices[0]
        .message.content
    )
    assert kw["low_level_keywords"] == ["Ebenezer Scrooge"] and "ghosts" in kw["high_level_keywords"]
    by_type = stats(url)["chat"]["by_type"]
    assert by_type["community_report"]["calls"] == by_type["global_map"]["calls"] == by_type["keywords"]["calls"] == 1


def test_answers_and_summaries(start):
    _, client = start()
    data = '-----Entities-----\n```csv\nid,entity,description\n3,MARLEY,"Marley was the partner of Scrooge."\n```'
    messages = [
        {"role": "system", "content": rag_answer.SYSTEM.format(context_data=data, response_type="Bullet points")},
        {"role": "user", "content": "Who was Marley?"},
    ]
    answer = chat(client, messages).choices[0].message.content
    assert answer.startswith("- MARLEY: Marley was the partner of Scrooge.") and "[Data: Entities (3)]" in answer
    prompt = summarize_descriptions.TEMPLATE.format(
        max_tokens=12, entity_name="SCROOGE", description_list="A miser.<SEP>He hates Christmas.<SEP>A miser."
    )
    summary = chat(client, prompt).choices[0].message.content
    assert summary.startswith("SCROOGE: A miser.") and count_tokens(summary, MODEL) <= 12
    cut = chat(client, extract_prompt(), max_tokens=10)
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens <= 10


def test_classify_by_last_user_message():
    prompt = extract_prompt()
    conv = Conversation.from_request(
        [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": COMPLETE},
            {"role": "user", "content": glean_loop.TEMPLATE},
        ]
    )
    assert classify(conv) == "glean_loop"
    conv.messages[-1] = ("user", glean_continue.TEMPLATE)
    assert classify(conv) == "glean_continue"
    assert classify(Conversation.from_request([{"role": "user", "content": prompt}])) == "extract"
    assert classify(Conversation.from_request([{"role": "user", "content": "hi"}])) == "unknown"


def test_models_and_cli_arguments(start):
    url, _ = start()
    models = httpx.get(url + "/models").json()
    assert models["object"] == "list" and any(m["id"] == MODEL for m in models["data"])
    bad = httpx.post(url + "/chat/completions", content=b"not json")
    assert bad.status_code == 400
    parser = add_arguments(argparse.ArgumentParser())
    cfg = config_from_args(
        parser.parse_args(
            [
                "--port",
                "9100",
                "--latency-ms",
                "5",
                "--error-rate",
                "0.1",
                "--rate-limit-tpm",
                "1000",
                "--rate-limit-rpm",
                "60",
                "--malformed-rate",
                "0.2",
                "--seed",
                "4",
                "--embedding-dim",
                "32",
            ]
        )
    )
    assert cfg == SimConfig(
        port=9100,
        latency_ms=5.0,
        error_rate=0.1,
        rate_limit_tpm=1000,
        rate_limit_rpm=60,
        malformed_rate=0.2,
        seed=4,
        embedding_dim=32,
    )
    with pytest.raises(ValueError):
        SimConfig(error_rate=1.5)


def test_query_helper_prompts(start):
    url, client = start()

    def ask(system: str, user: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return chat(client, messages).choices[0].message.content

    question = "Who was the business partner of Scrooge?"
    relevant = json.loads(
        ask(rate_community.SYSTEM.format(report="Marley was the business partner of Scrooge."), question)
    )
    unrelated = json.loads(ask(rate_community.SYSTEM.format(report="Fezziwig gave a ball."), question))
    assert relevant["rating"] == 5 and unrelated["rating"] == 0 and relevant["reason"]
    verdict = json.loads(ask(assess_answer.SYSTEM, f"Question: {question}\n\nAnswer: Marley was."))
    assert verdict == {"is_complete": False, "missing_info": ["business", "partner", "scrooge"]}
    excerpts = 'id,content\nc1,"Marley was the partner of Scrooge."\nc2,"Tim was ill."'
    summary = ask(map_summarize.SYSTEM.format(content_data=excerpts), question)
    assert summary == "Marley was the partner of Scrooge. [Sources (c1)]"
    answer = "Marley was the partner of Scrooge. [Data: Entities (3)] He died. Scrooge kept the firm."
    repaired = ask(format_repair.SYSTEM.format(response_type="Use bullet points", problems="- no bullets"), answer)
    assert repaired.splitlines() == [
        "- Marley was the partner of Scrooge. [Data: Entities (3)]",
        "- He died.",
        "- Scrooge kept the firm.",
    ]
    by_type = stats(url)["chat"]["by_type"]
    assert all(by_type[t]["calls"] >= 1 for t in ("rate_community", "assess_answer", "map_summarize", "format_repair"))


def test_answer_layouts():
    items = ["Scrooge is a miser.", "Marley is dead.", "Fred is cheerful.", "Tim is ill."]
    assert format_answer(items, "bullet points").splitlines()[0] == "- Scrooge is a miser."
    assert format_answer(items, "a numbered list").splitlines()[3] == "4. Tim is ill."
    assert "\n" not in format_answer(items, "Provide a single paragraph. No lists, no headings.")
    assert len(format_answer(items, "multiple paragraphs").split("\n\n")) >= 2
    detailed = format_answer(items, "a detailed analysis with Markdown headings")
    assert detailed.startswith("## ") and "\n## Details\n" in detailed
    comparison = format_answer(items, "a comparison: **Similarities:**, **Differences:**, **Conclusion:**")
    assert "**Similarities:**" in comparison and "**Differences:**" in comparison
    assert format_answer(["Only one."], "bullet points").count("\n- ") == 1  # lists get at least two items
