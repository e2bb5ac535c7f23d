"""Reports: the frozen result models, what may be published, the ledger, the Markdown view.

Reports are data: ``to_dict()`` gives the JSON of ``--json``. Renderers read them and are
never imported by them at module level.
"""
