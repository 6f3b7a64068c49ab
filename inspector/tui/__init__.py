"""The Textual dashboard (the only package that imports Textual).

    from inspector.tui.app import run_dashboard
    run_dashboard(lambda: sources.scenario_session("parse_date"), source={...}, replay=False)  # -> exit code

`inspector.state.fold` holds the pure fold the panes show; `inspector.testing.synthetic` builds observation sequences
without the loop (tests, demos, benchmarks).
"""
