"""The simulator answers nano-graphrag's and LightRAG's prompts in their parsers' formats, with the same
extraction rule as the project's own prompts (so the side-by-side benchmark compares like with like).

The prompts below follow the peers' templates (nano-graphrag 0.0.8.2 ``prompt.py``, LightRAG 1.5.7
``prompt.py``) in the parts the simulator reads; the peers themselves are not installed in the
project's environment (bench/harness/peers/setup.sh puts them in their own).
"""

from __future__ import annotations

import json
import re

from llm_simulator import peers
from llm_simulator.extraction import records_of
from llm_simulator.responders import Conversation, classify, respond

TEXT = (
    "Ebenezer Scrooge kept the counting-house with Bob Cratchit. Bob Cratchit went home to Camden Town, "
    "where Tiny Tim waited. Scrooge said Bob Cratchit could have the whole day. Jacob Marley was dead: "
    "Scrooge signed the register of his burial, and the Ghost of Jacob Marley visited Scrooge. The "
    "counting-house was cold, and the counting-house fire was small."
)
NANO_EXTRACT = (
    "-Goal-\nGiven a text document that is potentially relevant to this activity and a list of entity types, "
    "identify all entities of those types from the text and all relationships among the identified entities.\n"
    "-Examples-\nEntity_types: [person, technology, mission]\nText:\nAlex and Taylor.\n"
    "-Real Data-\n######################\nEntity_types: organization,person,geo,event\nText: " + TEXT
    + "\n######################\nOutput:\n"
)
LR_SYSTEM = (
    "---Role---\nYou are a Knowledge Graph Specialist responsible for extracting entities and relationships "
    "from the `---Input Text---` section of user prompt.\n---Instructions---\n"
    "  - Categorize the entity using the type guidance provided in the `---Entity Types---` section below.\n"
    "  - Wrong: `entity<|#|>...`\n  - Correct: `relation<|#|>...`\n"
    "---Entity Types---\nClassify each entity using one of the following types.\n\n"
    "- Person: Human individuals\n- Organization: Companies\n- Location: Geographic places\n"
    "- Event: Occurrences\n\n---Output Format Template---\nentity<|#|><entity_name>\n"
)
LR_USER = (
    "---Task---\nExtract entities and relationships from the `---Input Text---` section below.\n"
    "2. **Quantity Limits:** In this response, output at most 12 total rows and at most 5 entity rows.\n"
    "---Input Text---\n```\n" + TEXT + "\n```\n\n---Output---\n"
)
LR_GLEAN = ("---Task---\nBased on the last extraction task, identify and extract any missed or incorrectly "
            "formatted entities and relationships from the input text.\n---Output---\n")


def conv(*messages: tuple[str, str]) -> Conversation:
    return Conversation(list(messages))


def answered(kind: str, *messages: tuple[str, str]) -> str:
    """The simulator's answer to ``messages``, after checking they are recognised as ``kind``."""
    c = conv(*messages)
    assert classify(c) == kind
    return respond(kind, c, "gpt-4o-mini")


def test_nano_extraction_uses_the_shared_rule_and_nano_record_format():
    c = conv(("user", NANO_EXTRACT))
    assert classify(c) == "nano_extract"
    text, types = peers.nano_text_and_types(NANO_EXTRACT)
    assert text == TEXT and types == ("organization", "person", "geo", "event")
    out = respond("nano_extract", c, "gpt-4o-mini")
    assert out.endswith("<|COMPLETE|>")
    records = [r.strip() for r in out.removesuffix("<|COMPLETE|>").split("##") if r.strip()]
    assert records == records_of(TEXT, types)  # the same deterministic extraction as graphfleet's prompt gets
    names = {r.split("<|>")[1] for r in records if r.startswith('("entity"')}
    assert {"Bob Cratchit", "Scrooge", "Jacob Marley"} <= names
    # nano reads ("relationship"<|>src<|>tgt<|>description ... <|>weight): the weight is the last field
    rel = next(r for r in records if r.startswith('("relationship"'))
    assert re.fullmatch(r"\d+", rel[1:-1].split("<|>")[-1])


def test_nano_gleaning_adds_only_missed_entities_and_the_loop_check_answers_yes_or_no():
    first = respond("nano_extract", conv(("user", NANO_EXTRACT)), None)
    c = conv(("user", NANO_EXTRACT), ("assistant", first),
             ("user", "MANY entities were missed in the last extraction.  Add them below using the same format:\n"))
    assert classify(c) == "nano_glean_continue"
    glean = respond("nano_glean_continue", c, None)
    emitted = set(re.findall(r'\("entity"<\|>(.*?)<\|>', first))
    added = set(re.findall(r'\("entity"<\|>(.*?)<\|>', glean))
    assert added and not (added & emitted)
    loop = conv(*c.messages, ("assistant", glean),
                ("user", "It appears some entities may have still been missed.  Answer YES | NO if there are "
                         "still entities that need to be added.\n"))
    assert classify(loop) == "nano_glean_loop"
    assert respond("nano_glean_loop", loop, None) in ("YES", "NO")


def test_nano_community_report_reads_its_comma_tab_tables():
    describe = ('-----Reports-----\n```csv\n\n```\n-----Entities-----\n```csv\n'
                '"id",\t"entity",\t"type",\t"description",\t"degree"\n'
                '0,\t"BOB CRATCHIT",\t"PERSON",\t"Clerk to Scrooge.",\t2\n'
                '1,\t"TINY TIM",\t"PERSON",\t"Son of Bob Cratchit.",\t1\n```\n'
                '-----Relationships-----\n```csv\n"id",\t"source",\t"target",\t"description",\t"rank"\n'
                '0,\t"BOB CRATCHIT",\t"TINY TIM",\t"Father and son.",\t3\n```')
    prompt = ("You are an AI assistant ...\n# Goal\nWrite a comprehensive report of a community, given a list of "
              "entities\n# Real Data\n\nUse the following text for your answer.\n\nText:\n```\n" + describe
              + "\n```\n\nThe report should include the following sections:\n")
    c = conv(("user", prompt))
    assert classify(c) == "nano_community_report"
    report = json.loads(respond("nano_community_report", c, None))
    assert "BOB CRATCHIT" in report["title"] and "2 entities and 1 relationships" in report["summary"]
    assert {"title", "summary", "rating", "rating_explanation", "findings"} <= set(report)


def test_nano_summary_and_query_prompts():
    summary = conv(("user", "Please concatenate all of these into a single, comprehensive description.\n#######\n"
                            "-Data-\nEntities: \"SCROOGE\"\nDescription List: A miser.<SEP>Partner of Marley.\n"
                            "#######\nOutput:\n"))
    assert classify(summary) == "nano_summarize"
    out = respond("nano_summarize", summary, "gpt-4o-mini")
    assert "A miser." in out and "Partner of Marley." in out
    system = ("---Role---\nYou are a helpful assistant responding to questions about data in the tables provided.\n"
              "---Goal---\nGenerate a response consisting of a list of key points that responds to the user's "
              "question\n---Data tables---\nid,content,rating,importance\n0,\"Bob Cratchit is the clerk of "
              "Scrooge.\",5,1\n---Goal---\n...")
    points = json.loads(answered("nano_global_map", ("system", system), ("user", "Who is the clerk of Scrooge?")))[
        "points"]
    assert points[0]["score"] > 0 and "Cratchit" in points[0]["description"]
    local = system.replace("Generate a response consisting of a list of key points", "Generate a response")
    assert "Cratchit" in answered("nano_local", ("system", local), ("user", "Who is the clerk of Scrooge?"))


def test_nano_global_map_reads_report_cells_that_span_lines():
    """nano renders each report as one quoted cell of markdown (``# title``, ``## finding`` lines) in a
    ``,\t``-separated table; those lines are cell content, not section headers."""
    table = ('"id",\t"content",\t"rating",\t"importance"\n'
             '0,\t"# Scrooge and the Spirits\n\nScrooge is visited by three spirits.\n\n## Redemption\n\n'
             'The main theme of the story is redemption.",\t7.0,\t1.0\n'
             '1,\t"# The Cratchits\n\nBob Cratchit is the clerk of Scrooge.",\t5.0,\t1.0')
    system = ("---Role---\nYou are a helpful assistant responding to questions about data in the tables provided.\n"
              "---Goal---\nGenerate a response consisting of a list of key points that responds to the user's "
              f"question\n---Data tables---\n\n{table}\n\n---Goal---\n...")
    points = json.loads(answered("nano_global_map", ("system", system),
                                 ("user", "What is the main theme of the story?")))["points"]
    assert points[0]["score"] > 0 and "redemption" in points[0]["description"]
    assert points[0]["description"].endswith("[Data: Reports (0)]")


def test_lightrag_extraction_rows_respect_its_caps_and_types():
    c = conv(("system", LR_SYSTEM), ("user", LR_USER))
    assert classify(c) == "lightrag_extract"
    assert peers.lightrag_types(LR_SYSTEM) == ("Person", "Organization", "Location", "Event")
    out = respond("lightrag_extract", c, None)
    rows = out.splitlines()
    assert rows[-1] == "<|COMPLETE|>"
    ents = [r for r in rows if r.startswith("entity<|#|>")]
    rels = [r for r in rows if r.startswith("relation<|#|>")]
    assert 0 < len(ents) <= 5 and len(ents) + len(rels) <= 12
    assert all(len(r.split("<|#|>")) == 4 for r in ents) and all(len(r.split("<|#|>")) == 5 for r in rels)
    assert {r.split("<|#|>")[2] for r in ents} <= {"Person", "Organization", "Location", "Event"}
    names = {r.split("<|#|>")[1].upper() for r in ents}
    assert all(r.split("<|#|>")[1].upper() in names or r.split("<|#|>")[2].upper() in names for r in rels)
    glean = conv(("system", LR_SYSTEM), ("user", LR_USER), ("assistant", out), ("user", LR_GLEAN))
    assert classify(glean) == "lightrag_glean"
    more = respond("lightrag_glean", glean, None)
    added = {r.split("<|#|>")[1].upper() for r in more.splitlines() if r.startswith("entity<|#|>")}
    assert added and not (added & names)


def test_lightrag_keywords_summary_and_answer():
    kw = conv(("user", "---Role---\nYou are an expert keyword extractor, specializing in analyzing user queries\n"
                       "---Real Data---\nUser Query: How is Bob Cratchit related to Scrooge?\n\n---Output---\nOutput:"))
    assert classify(kw) == "lightrag_keywords"
    keywords = json.loads(respond("lightrag_keywords", kw, None))
    assert "Bob Cratchit" in keywords["low_level_keywords"]
    summ = conv(("user", "---Task---\nYour task is to synthesize a list of descriptions of a given entity or "
                         "relation into a single summary.\n7. Length Constraint: The summary's total length must not "
                         "exceed 50 tokens\n---Input---\nEntity Name: Scrooge\n\nDescription List:\n\n```\n"
                         '{"Description": "A miser."}\n{"Description": "Partner of Marley."}\n```\n\n---Output---\n'))
    assert classify(summ) == "lightrag_summarize"
    assert "A miser." in respond("lightrag_summarize", summ, "gpt-4o-mini")
    system = ("---Role---\n...\n---Goal---\nThe answer must integrate relevant facts from the Knowledge Graph and "
              "Document Chunks found in the **Context**.\n  - The response should be presented in Single Paragraph.\n"
              "---Context---\n\nKnowledge Graph Data (Entity):\n\n```json\n"
              '{"entity": "Bob Cratchit", "description": "Bob Cratchit is the clerk of Scrooge."}\n```\n')
    assert "clerk" in answered("lightrag_rag", ("system", system), ("user", "Who is the clerk of Scrooge?"))
