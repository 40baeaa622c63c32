"""The query engine core (pure): params and presets, token budgets, context builders per mode,
global map/reduce pieces, response formats, context-overflow truncation strategies, and ``answer_query``.

Entry points: ``shared.domain.query.engine.answer_query`` (every mode), ``shared.domain.query.params.resolve``,
``shared.domain.query.context_global.plan_global`` / ``build_map_messages`` / ``reduce_points`` and
``shared.domain.query.global_run.collect_map_results`` for the Celery chord.
"""
