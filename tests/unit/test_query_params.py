import pytest
from pydantic import ValidationError

from shared.domain.query.params import PRESETS, QueryParam, resolve


def test_presets_resolve_to_seed_004_numbers():
    bal = resolve(QueryParam(preset="balanced"))
    assert (bal.top_k, bal.chunk_top_k, bal.max_total_tokens, bal.max_entity_tokens, bal.max_relation_tokens) == (
        30,
        15,
        15000,
        4000,
        5000,
    )
    low = resolve(QueryParam(preset="low_memory"))
    assert (low.top_k, low.chunk_top_k, low.max_total_tokens, low.max_entity_tokens, low.max_relation_tokens) == (
        20,
        10,
        8000,
        3000,
        3000,
    )
    d = resolve(QueryParam())
    assert (d.max_total_tokens, d.max_entity_tokens, d.max_relation_tokens) == (30000, 6000, 8000)
    assert d.applied_preset == "default"


def test_explicit_fields_win_over_presets():
    rp = resolve(QueryParam(preset="low_memory", top_k=55, max_entity_tokens=1234))
    assert rp.top_k == 55 and rp.max_entity_tokens == 1234
    assert rp.chunk_top_k == 10 and rp.max_total_tokens == 8000
    assert "top_k" in rp.explicit_fields


def test_tenant_preset_and_query_preset_precedence():
    assert resolve(QueryParam(), tenant_preset="balanced").max_total_tokens == 15000
    assert resolve(QueryParam(preset="low_memory"), tenant_preset="balanced").max_total_tokens == 8000
    # the query may even choose "default" explicitly over a tenant preset
    assert resolve(QueryParam(preset="default"), tenant_preset="balanced").max_total_tokens == 30000
    custom = resolve(QueryParam(top_k=7), tenant_preset={"preset": "balanced", "chunk_top_k": 3})
    assert (custom.top_k, custom.chunk_top_k, custom.max_total_tokens) == (7, 3, 15000)
    with pytest.raises(ValueError):
        resolve(QueryParam(), tenant_preset="nope")


@pytest.mark.parametrize(
    "field",
    [
        "top_k",
        "chunk_top_k",
        "max_total_tokens",
        "max_entity_tokens",
        "max_relation_tokens",
        "output_reserve",
        "causal_k",
        "global_group_tokens",
    ],
)
def test_negative_budgets_rejected(field):
    with pytest.raises(ValidationError):
        QueryParam(**{field: -1})


def test_unknown_mode_and_extra_fields_rejected():
    with pytest.raises(ValidationError):
        QueryParam(mode="mix")
    with pytest.raises(ValidationError):
        QueryParam(max_tokens_for_everything=3)
    with pytest.raises(ValidationError):
        QueryParam(local_proportions={"reports": 0.9, "entities": 0.9})


def test_presets_table_has_the_three_names():
    assert set(PRESETS) == {"default", "balanced", "low_memory"}
