import pytest

from shared.domain.query.formats import (
    RESPONSE_TYPES,
    assess_context_quality,
    build_repair_messages,
    check_response_format,
    normalize_type,
    response_instructions,
    target_words,
)


def test_nine_response_types_with_instructions():
    assert set(RESPONSE_TYPES) == {
        "single_paragraph",
        "multiple_paragraphs",
        "bullet_points",
        "numbered_list",
        "executive_summary",
        "detailed_analysis",
        "comparison",
        "timeline",
        "pros_cons",
    }
    assert "bullet" in response_instructions("Bullet Points").lower()
    assert response_instructions("Answer in one haiku") == "Answer in one haiku"  # free text accepted
    assert "about 300 words" in response_instructions("bullet_points", 300)
    assert normalize_type("Multiple Paragraphs") == "multiple_paragraphs"


def test_format_checker_catches_non_bulleted_answer():
    ok, problems = check_response_format("Scrooge is a miser. He has a clerk.", "bullet_points")
    assert not ok and "bullet" in problems[0]
    assert check_response_format("- Scrooge is a miser\n- Cratchit is his clerk", "bullet_points")[0]
    assert check_response_format("• one\n• two", "bullet_points")[0]


@pytest.mark.parametrize(
    "rtype,good,bad",
    [
        ("numbered_list", "1. First\n2. Second", "First and second"),
        ("detailed_analysis", "## Intro\nText [Data: Sources (chunk-1)]", "Text without headings"),
        ("executive_summary", "Overview.\n- a\n- b\n[Data: Reports (L0-0)]", "- a\n- b"),
        ("single_paragraph", "One paragraph only.", "Para one.\n\nPara two."),
        ("multiple_paragraphs", "Para one.\n\nPara two.", "Only one."),
        ("comparison", "**Similarities:** x\n**Differences:** y", "They differ."),
        ("pros_cons", "**Advantages:** a\n**Disadvantages:** b", "It is good."),
        ("timeline", "- 1843: published\n- 1844: staged", "Long ago it happened."),
    ],
)
def test_format_checker_per_type(rtype, good, bad):
    assert check_response_format(good, rtype)[0], rtype
    assert not check_response_format(bad, rtype)[0], rtype


def test_free_text_and_empty():
    assert check_response_format("anything", "Answer like a pirate")[0]
    assert not check_response_format("", "bullet_points")[0]


def test_context_quality_score_follows_seed_weights():
    q = assess_context_quality(entities=20, relations=40, chunks=10, report_levels=[0, 2])
    assert q["score"] == 1.0
    q0 = assess_context_quality(0, 0, 0)
    assert q0["score"] == 0.0
    q1 = assess_context_quality(10, 10, 5, [1])
    assert q1["score"] == pytest.approx(0.15 + 0.15 + 0.1 + 0.1)


def test_target_words_adapts_within_bounds():
    small = target_words("detailed_analysis", 1000, 0.1, 3)
    big = target_words("detailed_analysis", 40000, 0.9, 20)
    assert 150 <= small < big <= 1000
    assert target_words("single_paragraph", 40000, 0.9, 20, hi=250) == 250
    assert target_words("bullet_points", 100, 0.8, 1) == 300  # rich context never below base


def test_repair_messages():
    msgs = build_repair_messages("plain text", "bullet_points", ["expected bullet points"])
    assert "-Task- Rewrite the answer below" in msgs[0]["content"] and msgs[1]["content"] == "plain text"
